import Foundation
import RevsyncWire
import Testing
@testable import RevsyncServer

/// On-delete rules run in the server and are written into the change set's log entry.
@Suite struct DeleteRuleTests {
    @Test func cascadeAndSetNullAreWrittenIntoTheLogEntry() async throws {
        try await withTestServer { harness in
            let admin = try await harness.register("admin", name: "admin")
            let basics = try await harness.seedBasics(admin)
            let notes = try await harness.sync(admin, from: basics.revision, [changeSet(seq: 2, ("notes", EntityChanges(create: [-9], attributes: [-9: ["author_id": .integer(basics.user), "player_id": .integer(basics.player), "body": "hi", "pinned": false]])))])
            let note = try #require(notes.committed.last?.permanentId(of: -9, in: "notes"))
            // Deleting the user: players.user_id and notes.author_id are "set null".
            let response = try await harness.sync(admin, from: notes.maxRevision, [changeSet(seq: 3, ("users", EntityChanges(delete: [basics.user], attributes: [basics.user: ["revision": .integer(basics.revision)]])))])
            let entry = try #require(response.committed.last)
            #expect(entry.entities["users"]?.delete == [basics.user])
            #expect(entry.entities["players"]?.update == [basics.player])
            #expect(entry.entities["players"]?.attributes[basics.player]?["user_id"] == .null)
            #expect(entry.entities["notes"]?.attributes[note]?["author_id"] == .null)
            #expect(entry.entities["notes"]?.attributes[note]?["revision"] == .integer(response.maxRevision))

            // Deleting the team cascades to its players, screens, and their screen items.
            let cascade = try await harness.sync(admin, from: response.maxRevision, [changeSet(seq: 4, ("teams", EntityChanges(delete: [basics.team], attributes: [basics.team: ["revision": .integer(basics.revision)]])))])
            let deleted = try #require(cascade.committed.last)
            #expect(deleted.entities["players"]?.delete == [basics.player])
            #expect(deleted.entities["screens"]?.delete == [basics.screen])
            #expect(deleted.entities["screen_items"]?.delete == [basics.screenItem])
            // The note referenced the player with "cascade": it goes too.
            #expect(deleted.entities["notes"]?.delete == [note])
            #expect(try await harness.count("screen_items") == 0)
        }
    }

    @Test func restrictRefusesTheDeleteAndReportsTheReferencingRecord() async throws {
        try await withTestServer { harness in
            let admin = try await harness.register("admin", name: "admin")
            let basics = try await harness.seedBasics(admin)
            let response = try await harness.sync(admin, from: basics.revision, [changeSet(seq: 2, ("leagues", EntityChanges(delete: [basics.league], attributes: [basics.league: ["revision": .integer(basics.revision)]])))])
            let corrective = try #require(response.corrective.first)
            #expect(corrective.reason?.code == .reference)
            #expect(corrective.reason?.message.contains("teams \(basics.team)") == true)
            #expect(corrective.entities["leagues"]?.update == [basics.league])
            #expect(corrective.entities["teams"]?.update == [basics.team])
            #expect(try await harness.count("leagues") == 1)
        }
    }

    @Test func memberDeletingAScreenItemClearsReferencesThroughSetNull() async throws {
        try await withTestServer { harness in
            let admin = try await harness.register("admin", name: "admin")
            let member = try await harness.register("member", name: "member")
            let basics = try await harness.seedBasics(admin)
            let created = try await harness.sync(admin, from: basics.revision, [changeSet(
                seq: 2,
                ("screen_items", EntityChanges(create: [-1], attributes: [-1: ["screen_id": .integer(basics.screen), "label": "a", "kind": "k", "sort_order": 2]])),
                ("screen_instances", EntityChanges(create: [-2], attributes: [-2: ["screen_id": .integer(basics.screen), "date": "2024-01-01"]])),
                ("screen_instance_items", EntityChanges(create: [-3], attributes: [-3: ["screen_instance_id": -2, "screen_item_id": -1]])))])
            // Members may delete screen items; the instance item only loses its reference (set null).
            // (A cascade into an entity the role may not delete is covered by DeletePlanTests.)
            #expect(created.corrective.isEmpty, "\(created.corrective.map(\.reason))")
            let item = try #require(created.committed.last?.permanentId(of: -1, in: "screen_items"))
            let allowed = try await harness.sync(member, from: created.maxRevision, [changeSet(seq: 1, ("screen_items", EntityChanges(delete: [item], attributes: [item: ["revision": .integer(created.maxRevision)]])))])
            #expect(allowed.corrective.isEmpty, "\(allowed.corrective.map(\.reason))")
            #expect(allowed.committed.last?.entities["screen_instance_items"]?.update.count == 1)
        }
    }
}
