import RevsyncRules
import RevsyncWire
import Testing
@testable import RevsyncServer

/// The write rules of docs/protocol.md (log entries, acknowledgements, temporary ids,
/// conflicts, deletes) through `SyncService` on in-memory stores.
@Suite struct SyncServiceWriteTests {
    @Test func committedSetGetsTheNextRevisionPermanentIdsAndOldIdsInTheAuthorsForm() async throws {
        let harness = ServiceHarness()
        let seeded = try await harness.seed()
        #expect(seeded.revision == 1 && harness.head == 1)
        let member = harness.device(2)
        let other = try await harness.sync(member, from: 0)
        let entry = try #require(other.changeSets.first)
        // Other devices get the public form: no seq, no __oldId__.
        #expect(entry.seq == nil && entry.revision == 1)
        #expect(entry.entities["players"]?.attributes[seeded.player]?[ReservedAttribute.oldId] == nil)
        #expect(entry.entities["players"]?.attributes[seeded.player]?["team_id"] == .integer(seeded.team))
        // The author gets its own entry back with seq and __oldId__.
        let own = try await harness.sync(harness.admin, from: 0)
        #expect(own.changeSets.first?.seq == 1)
        #expect(own.changeSets.first?.entities["players"]?.attributes[seeded.player]?[ReservedAttribute.oldId] == .integer(-6))
    }

    @Test func earlierTemporaryIdsResolveAndUnknownOnesAreReferenceConflicts() async throws {
        let harness = ServiceHarness()
        let seeded = try await harness.seed()
        let resolved = try await harness.sync(harness.admin, from: 1, [changeSet(
            seq: 2, ("screens", EntityChanges(create: [-10], attributes: [-10: ["name": "Jump", "team_id": -2, "sort_order": 2]])))])
        let ack = try #require(resolved.changeSets.last)
        #expect(ack.conflict == false)
        #expect(ack.entities["screens"]?.attributes.values.first?["team_id"] == .integer(seeded.team))

        let unknown = try await harness.sync(harness.admin, from: 2, [changeSet(
            seq: 3, ("screens", EntityChanges(create: [-11], attributes: [-11: ["name": "Throw", "team_id": -99, "sort_order": 3]])))])
        #expect(unknown.changeSets.last?.reason?.code == .reference)
        let reused = try await harness.sync(harness.admin, from: 2, [changeSet(
            seq: 4, ("screens", EntityChanges(create: [-10], attributes: [-10: ["name": "Again", "team_id": .integer(seeded.team), "sort_order": 3]])))])
        #expect(reused.changeSets.last?.reason?.code == .invalid)
        #expect(harness.head == 2)
    }

    @Test func staleRevisionIsAConflictUnlessEveryWriteSinceWasTheDevicesOwn() async throws {
        let harness = ServiceHarness()
        let seeded = try await harness.seed()
        let member = harness.device(2)
        func rename(_ seq: Int64, basis: Int64, _ city: String) -> ChangeSet {
            changeSet(seq: seq, ("teams", EntityChanges(update: [seeded.team], attributes: [seeded.team: ["revision": .integer(basis), "city": .string(city)]])))
        }
        // Two own writes on top of revision 1: the second is not a conflict.
        let own = try await harness.sync(member, from: 1, [rename(1, basis: 1, "Basel"), rename(2, basis: 1, "Bern")])
        #expect(own.changeSets.filter { $0.conflict == false && $0.seq != nil }.count == 2)
        // Another device wrote since revision 1: now it is stale.
        _ = try await harness.sync(harness.admin, from: 3, [rename(2, basis: 3, "Chur")])
        let stale = try await harness.sync(member, from: 4, [rename(3, basis: 3, "Aarau")])
        let rejection = try #require(stale.changeSets.last)
        #expect(rejection.conflict == true && rejection.reason?.code == .staleRevision)
        // The corrective set carries the record as the server has it.
        #expect(rejection.entities["teams"]?.attributes[seeded.team]?["city"] == "Chur")
        #expect(harness.head == 4)
        #expect(harness.values("teams", seeded.team)?["city"] == "Chur")
    }

    @Test func writeHistoryFollowsTheRecordVersionRule() async throws {
        let harness = ServiceHarness()
        let seeded = try await harness.seed()
        let member = harness.device(2)
        _ = try await harness.sync(member, from: 1, [changeSet(
            seq: 1, ("teams", EntityChanges(update: [seeded.team], attributes: [seeded.team: ["revision": 1, "city": "Basel"]])))])
        let row = try #require(harness.dataset.withState { $0.records["teams"]?[seeded.team] })
        #expect(row.revision == 2 && row.writer == 2 && row.otherRevision == 1)
    }

    @Test func rolesMayOnlyDoWhatTheSchemaAllows() async throws {
        let harness = ServiceHarness()
        let seeded = try await harness.seed()
        let member = harness.device(2)
        let viewer = harness.device(3, role: "viewer")
        let league = try await harness.sync(member, from: 1, [changeSet(
            seq: 1, ("leagues", EntityChanges(create: [-1], attributes: [-1: ["name": "Mine"]])))])
        #expect(league.changeSets.last?.reason?.code == .forbidden)
        let viewing = try await harness.sync(viewer, from: 1, [changeSet(
            seq: 1, ("teams", EntityChanges(update: [seeded.team], attributes: [seeded.team: ["revision": 1, "city": "Basel"]])))])
        #expect(viewing.changeSets.last?.reason?.code == .forbidden)
        let empty = try await harness.sync(viewer, from: 1, [ChangeSet(seq: 2)])
        #expect(empty.changeSets.last?.reason?.code == .invalid)
        #expect(harness.head == 1)
    }

    @Test func deletesCascadeSetNullAndRestrict() async throws {
        let harness = ServiceHarness()
        let seeded = try await harness.seed()
        // restrict: a league with teams cannot be deleted.
        let restricted = try await harness.sync(harness.admin, from: 1, [changeSet(
            seq: 2, ("leagues", EntityChanges(delete: [seeded.league], attributes: [seeded.league: ["revision": 1]])))])
        #expect(restricted.changeSets.last?.reason?.code == .reference)
        // set null: deleting the user clears the player's reference; cascade: deleting the team removes its screens, items and players.
        let deleted = try await harness.sync(harness.admin, from: 1, [changeSet(
            seq: 3, ("users", EntityChanges(delete: [seeded.user], attributes: [seeded.user: ["revision": 1]])))])
        #expect(deleted.changeSets.last?.conflict == false)
        #expect(harness.values("players", seeded.player)?["user_id"] == .null)
        let entry = try #require(deleted.changeSets.last)
        #expect(entry.entities["players"]?.update == [seeded.player])
        let team = try await harness.sync(harness.admin, from: 2, [changeSet(
            seq: 4, ("teams", EntityChanges(delete: [seeded.team], attributes: [seeded.team: ["revision": 1]])))])
        let cascade = try #require(team.changeSets.last)
        #expect(cascade.conflict == false)
        #expect(Set(cascade.entities["screens"]?.delete ?? []) == [seeded.screen])
        #expect(Set(cascade.entities["screen_items"]?.delete ?? []) == [seeded.screenItem])
        #expect(harness.count("players") == 0 && harness.count("screens") == 0 && harness.count("teams") == 0)
        // restrict is lifted when the dependent goes in the same change set.
        let both = try await harness.sync(harness.admin, from: 3, [changeSet(
            seq: 5, ("leagues", EntityChanges(delete: [seeded.league], attributes: [seeded.league: ["revision": 1]])))])
        #expect(both.changeSets.last?.conflict == false)
    }

    /// (A cascade into an entity the role may not delete is forbidden too: the default schema has
    /// no such pair for its roles, so `DeletePlanTests` covers that rule.)
    @Test func aDeleteTheRoleMayNotMakeIsForbiddenAndTheCorrectiveSetRestoresItsDependents() async throws {
        let harness = ServiceHarness()
        let seeded = try await harness.seed()
        let member = harness.device(2)
        _ = try await harness.sync(harness.admin, from: 1, [changeSet(
            seq: 2, ("screen_instances", EntityChanges(create: [-20], attributes: [-20: ["screen_id": .integer(seeded.screen), "date": "2024-05-01T10:00:00Z"]])))])
        // Members may delete screen items but not screens.
        let forbidden = try await harness.sync(member, from: 2, [changeSet(
            seq: 1, ("screens", EntityChanges(delete: [seeded.screen], attributes: [seeded.screen: ["revision": 1]])))])
        let rejection = try #require(forbidden.changeSets.last)
        #expect(rejection.reason?.code == .forbidden)
        #expect(harness.count("screens") == 1)
        // What the device may have removed locally with the screen comes back: its items and instances.
        #expect(rejection.entities["screens"]?.update == [seeded.screen])
        #expect(rejection.entities["screen_items"]?.update == [seeded.screenItem])
        #expect(rejection.entities["screen_instances"]?.update.count == 1)
    }

    @Test func deletedRecordsAreNotFound() async throws {
        let harness = ServiceHarness()
        let seeded = try await harness.seed()
        _ = try await harness.sync(harness.admin, from: 1, [changeSet(
            seq: 2, ("screen_items", EntityChanges(delete: [seeded.screenItem], attributes: [seeded.screenItem: ["revision": 1]])))])
        let gone = try await harness.sync(harness.admin, from: 2, [changeSet(
            seq: 3, ("screen_items", EntityChanges(update: [seeded.screenItem], attributes: [seeded.screenItem: ["revision": 1, "label": "200 m"]])))])
        let rejection = try #require(gone.changeSets.last)
        #expect(rejection.reason?.code == .notFound)
        #expect(rejection.entities["screen_items"]?.delete == [seeded.screenItem])
    }

    @Test func aLogEntryOverItsLimitIsRejectedAndTakesNoRevision() async throws {
        let harness = ServiceHarness { $0.maxLogEntryBytes = 300 }
        let long = String(repeating: "x", count: 400)
        let response = try await harness.sync(harness.admin, from: 0, [changeSet(
            seq: 1, ("leagues", EntityChanges(create: [-1], attributes: [-1: ["name": .string(long)]])))])
        #expect(response.changeSets.last?.reason?.code == .invalid)
        #expect(harness.head == 0 && harness.count("leagues") == 0)
    }
}
