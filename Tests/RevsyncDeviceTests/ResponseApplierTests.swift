import RevsyncWire
import Testing

@testable import RevsyncDevice

@Suite("Applying responses")
struct ResponseApplierTests {
    let applier = ResponseApplier(schema: TestSchema.schema)

    @Test func acknowledgementReplacesTemporaryIdsInRecordsReferencesAndOutbox() throws {
        let store = try seededStore()
        let ids = try edit(store) { tx in
            let player = try tx.create("players", ["team_id": 10, "number": 9])
            let note = try tx.create("notes", ["player_id": .integer(player), "body": "fast"])
            return (player, note)
        }.value
        // A later edit, still pending, on the new player.
        try edit(store) { tx in try tx.update("players", id: ids.0, ["number": 10]) }

        let ack = ChangeSet.committed(4, seq: 1) { cs in
            cs.create("players", 200, [ReservedAttribute.oldId: .integer(ids.0), "revision": 4, "team_id": 10, "number": 9])
            cs.create("notes", 201, [ReservedAttribute.oldId: .integer(ids.1), "revision": 4, "player_id": 200, "body": "fast"])
        }
        let outcome = try applier.apply(SyncResponse(maxRevision: 4, changeSets: [ack]), to: store, sent: [1])

        #expect(outcome.acknowledged == [1])
        #expect(Set(outcome.idMappings.map(\.permanentId)) == [200, 201])
        #expect(try store.record("players", id: ids.0) == nil)
        #expect(try store.record("notes", id: ids.1) == nil)
        let player = try #require(try store.record("players", id: 200))
        #expect(player.revision == 4)
        #expect(player["number"] == 10, "the pending update stays on top")
        #expect(try store.record("notes", id: 201)?["player_id"] == 200)
        let pending = try store.outbox()
        #expect(pending.map(\.seq) == [2])
        #expect(pending.first?.entities["players"]?.update == [200])
        #expect(try store.temporaryIdMapping(ids.0) == TemporaryIdMapping(entity: "players", id: 200))
        #expect(try store.meta().maxRevision == 4)
    }

    @Test func acknowledgementAdoptsTheServersValues() throws {
        let store = try seededStore()
        let id = try edit(store) { tx in try tx.create("users", ["first_name": "Ana", "date_of_birth": "2001-02-03T04:05:06+02:00"]) }.value
        let ack = ChangeSet.committed(4, seq: 1) { cs in
            cs.create("users", 300, [ReservedAttribute.oldId: .integer(id), "revision": 4, "first_name": "Ana (verified)", "date_of_birth": "2001-02-03 02:05:06+00"])
        }
        _ = try applier.apply(SyncResponse(maxRevision: 4, changeSets: [ack]), to: store, sent: [1])
        let user = try #require(try store.record("users", id: 300))
        #expect(user.attributes == ["first_name": "Ana (verified)", "date_of_birth": "2001-02-03 02:05:06+00"])
        #expect(try store.outbox().isEmpty)
    }

    @Test func catchUpUpdateMergesChangedFieldsAndRevision() throws {
        let store = try seededStore()
        let catchUp = ChangeSet.committed(4) { cs in cs.update("teams", 10, ["revision": 4, "city": "York"]) }
        let outcome = try applier.apply(SyncResponse(maxRevision: 4, changeSets: [catchUp]), to: store, sent: [])
        #expect(try store.record("teams", id: 10) == DeviceRecord(id: 10, revision: 4, attributes: ["league_id": 1, "name": "Owls", "city": "York"]))
        #expect(outcome.changes.upserted["teams"] == [10])
        #expect(outcome.acknowledged.isEmpty)
    }

    @Test func catchUpCreateAndDeleteFromOtherDevices() throws {
        let store = try seededStore()
        let first = ChangeSet.committed(4) { cs in cs.create("players", 50, ["revision": 4, "team_id": 10, "rating": 7]) }
        let second = ChangeSet.committed(5) { cs in cs.delete("players", 50) }
        let third = ChangeSet.committed(6) { cs in cs.create("players", 51, ["revision": 6, "team_id": 10, "active": true]) }
        let outcome = try applier.apply(SyncResponse(maxRevision: 6, changeSets: [first, second, third]), to: store, sent: [])
        #expect(try store.record("players", id: 50) == nil)
        let created = try #require(try store.record("players", id: 51))
        #expect(created.attributes == ["team_id": 10, "user_id": .null, "number": .null, "rating": .null, "active": true])
        #expect(outcome.changes.deleted["players"] == [50])
        #expect(outcome.committedChangeSets == 3)
        #expect(try store.meta().maxRevision == 6)
    }

    @Test func aRecordIsNeverDowngradedByAnOlderChangeSet() throws {
        let store = try seededStore()
        try store.put("teams", DeviceRecord(id: 11, revision: 9, attributes: ["league_id": 1, "name": "New", "city": .null]))
        try store.setMeta(DeviceMeta(maxRevision: 3, bootstrapped: true))
        let stale = ChangeSet.committed(5) { cs in cs.update("teams", 11, ["revision": 5, "name": "Old"]) }
        _ = try applier.apply(SyncResponse(maxRevision: 5, changeSets: [stale]), to: store, sent: [])
        #expect(try store.record("teams", id: 11)?["name"] == "New")
        #expect(try store.record("teams", id: 11)?.revision == 9)
    }

    @Test func anOldAcknowledgementAfterRebootstrapOnlyMapsIdsAndClearsTheOutbox() throws {
        // The device created a team (seq 1), the response was lost, and it bootstrapped
        // again at revision 20 from a snapshot that already holds the team (id 321).
        let store = try seededStore()
        let temporary = try edit(store) { tx in try tx.create("teams", ["league_id": 1, "name": "Hawks"]) }.value
        try store.put("teams", DeviceRecord(id: 321, revision: 15, attributes: ["league_id": 1, "name": "Hawks renamed", "city": .null]))
        var meta = try store.meta()
        meta.maxRevision = 20
        try store.setMeta(meta)

        let repeated = ChangeSet.committed(7, seq: 1) { cs in
            cs.create("teams", 321, [ReservedAttribute.oldId: .integer(temporary), "revision": 7, "league_id": 1, "name": "Hawks", "city": .null])
        }
        let outcome = try applier.apply(SyncResponse(maxRevision: 20, changeSets: [repeated]), to: store, sent: [1])
        #expect(outcome.acknowledged == [1])
        #expect(try store.record("teams", id: temporary) == nil, "no duplicate of the team")
        #expect(try store.record("teams", id: 321)?["name"] == "Hawks renamed", "the newer snapshot value is kept")
        #expect(try store.outbox().isEmpty)
        #expect(try store.meta().maxRevision == 20)
    }

    @Test func anOldAcknowledgementDoesNotRecreateARecordDeletedSince() throws {
        let store = try seededStore()
        let temporary = try edit(store) { tx in try tx.create("teams", ["league_id": 1, "name": "Hawks"]) }.value
        var meta = try store.meta()
        meta.maxRevision = 20
        try store.setMeta(meta)
        let repeated = ChangeSet.committed(7, seq: 1) { cs in
            cs.create("teams", 321, [ReservedAttribute.oldId: .integer(temporary), "revision": 7, "league_id": 1, "name": "Hawks"])
        }
        _ = try applier.apply(SyncResponse(maxRevision: 20, changeSets: [repeated]), to: store, sent: [1])
        #expect(try store.record("teams", id: 321) == nil)
        #expect(try store.record("teams", id: temporary) == nil)
    }

    /// A rebuilt acknowledgement (its log entry pruned) lists a record the change set created
    /// and someone deleted since under `delete`, with `__oldId__` only: the device's temporary
    /// copy goes, and the mapping is kept.
    @Test func aRebuiltAcknowledgementOfARecordDeletedSinceDropsItsTemporaryCopy() throws {
        let store = try seededStore()
        let temporary = try edit(store) { tx in try tx.create("teams", ["league_id": 1, "name": "Hawks"]) }.value
        var meta = try store.meta()
        meta.maxRevision = 20
        try store.setMeta(meta)
        let rebuilt = ChangeSet.committed(7, seq: 1) { cs in cs.delete("teams", 321, [ReservedAttribute.oldId: .integer(temporary)]) }
        let outcome = try applier.apply(SyncResponse(maxRevision: 20, changeSets: [rebuilt]), to: store, sent: [1])
        #expect(outcome.acknowledged == [1])
        #expect(try store.record("teams", id: temporary) == nil, "the temporary copy of a record deleted since stayed")
        #expect(try store.record("teams", id: 321) == nil)
        #expect(try store.temporaryIdMapping(temporary) == TemporaryIdMapping(entity: "teams", id: 321))
        #expect(try store.outbox().isEmpty)
    }

    @Test func correctiveSetRestoresTheServersRecordAndReportsTheConflict() throws {
        let store = try seededStore()
        try edit(store) { tx in try tx.update("teams", id: 10, ["name": "Mine"]) }
        let corrective = ChangeSet.corrective(seq: 1, .staleRevision) { cs in
            cs.update("teams", 10, ["revision": 8, "league_id": 1, "name": "Theirs", "city": "Hull"])
        }
        let outcome = try applier.apply(SyncResponse(maxRevision: 8, changeSets: [corrective]), to: store, sent: [1])
        #expect(try store.record("teams", id: 10) == DeviceRecord(id: 10, revision: 8, attributes: ["league_id": 1, "name": "Theirs", "city": "Hull"]))
        #expect(try store.outbox().isEmpty)
        let conflict = try #require(outcome.conflicts.first)
        #expect(conflict.seq == 1)
        #expect(conflict.reason.code == .staleRevision)
        #expect(conflict.rejected?.entities["teams"]?.update == [10])
        #expect(conflict.restored["teams"]?.first?.attributes["name"] == "Theirs")
        #expect(outcome.acknowledged.isEmpty)
    }

    @Test func correctiveSetDropsRecordsTheRejectedChangeSetCreated() throws {
        let store = try seededStore()
        let player = try edit(store) { tx in try tx.create("players", ["team_id": 10]) }.value
        let corrective = ChangeSet.corrective(seq: 1, .forbidden) { cs in
            cs.delete("players", player)
            cs.update("teams", 10, ["revision": 3, "league_id": 1, "name": "Owls", "city": "Leeds"])
        }
        let outcome = try applier.apply(SyncResponse(maxRevision: 3, changeSets: [corrective]), to: store, sent: [1])
        #expect(try store.record("players", id: player) == nil)
        #expect(outcome.conflicts.first?.dropped["players"] == [player])
        #expect(outcome.changes.deleted["players"] == [player])
    }

    @Test func correctiveSetRecreatesRecordsARejectedDeleteCascadedLocally() throws {
        let store = try seededStore()
        try store.put("players", DeviceRecord(id: 60, revision: 2, attributes: ["team_id": 10, "user_id": .null, "number": 4, "rating": .null, "active": .null]))
        try edit(store) { tx in try tx.delete("teams", id: 10) }
        #expect(try store.record("players", id: 60) == nil, "the local delete cascades")
        let corrective = ChangeSet.corrective(seq: 1, .staleRevision) { cs in
            cs.update("teams", 10, ["revision": 5, "league_id": 1, "name": "Owls", "city": "Leeds"])
            cs.update("players", 60, ["revision": 2, "team_id": 10, "number": 4])
        }
        _ = try applier.apply(SyncResponse(maxRevision: 5, changeSets: [corrective]), to: store, sent: [1])
        #expect(try store.record("teams", id: 10)?.revision == 5)
        #expect(try store.record("players", id: 60)?["number"] == 4)
        #expect(try store.record("players", id: 60)?["active"] == .null)
    }

    @Test func correctiveCarryingOldIdMapsTheTemporaryId() throws {
        // seq 1 created the team and was committed, but its response was lost; seq 2
        // (an update of it) is rejected and the corrective names it by both ids.
        let store = try seededStore()
        let team = try edit(store) { tx in try tx.create("teams", ["league_id": 1, "name": "Hawks"]) }.value
        try edit(store) { tx in try tx.update("teams", id: team, ["city": "Bath"]) }
        let ack = ChangeSet.committed(4, seq: 1) { cs in
            cs.create("teams", 400, [ReservedAttribute.oldId: .integer(team), "revision": 4, "league_id": 1, "name": "Hawks", "city": .null])
        }
        let corrective = ChangeSet.corrective(seq: 2, .staleRevision) { cs in
            cs.update("teams", 400, [ReservedAttribute.oldId: .integer(team), "revision": 5, "league_id": 1, "name": "Hawks", "city": "Cork"])
        }
        let outcome = try applier.apply(SyncResponse(maxRevision: 5, changeSets: [ack, corrective]), to: store, sent: [1, 2])
        #expect(outcome.acknowledged == [1])
        #expect(outcome.conflicts.map(\.seq) == [2])
        #expect(try store.record("teams", id: 400)?["city"] == "Cork")
        #expect(try store.record("teams", id: team) == nil)
        #expect(try store.outbox().isEmpty)
    }

    @Test func pendingLocalEditsStayOnTopOfCatchUp() throws {
        let store = try seededStore()
        try edit(store) { tx in try tx.update("teams", id: 10, ["city": "Mine"]) }
        let catchUp = ChangeSet.committed(4) { cs in cs.update("teams", 10, ["revision": 4, "city": "Theirs", "name": "Owls FC"]) }
        _ = try applier.apply(SyncResponse(maxRevision: 4, changeSets: [catchUp]), to: store, sent: [])
        let team = try #require(try store.record("teams", id: 10))
        #expect(team["city"] == "Mine")
        #expect(team["name"] == "Owls FC")
        #expect(team.revision == 4)
        #expect(try store.outbox().first?.entities["teams"]?.attributes[10]?["revision"] == 3, "the basis stays the revision the edit was made on")
    }

    @Test func editsMadeWhileARequestIsInFlightSurviveItsAcknowledgement() throws {
        let store = try seededStore()
        try edit(store) { tx in try tx.update("teams", id: 10, ["city": "First"]) }  // sent as seq 1
        try edit(store) { tx in try tx.update("teams", id: 10, ["city": "Second"]) }  // made during the flight
        let ack = ChangeSet.committed(4, seq: 1) { cs in cs.update("teams", 10, ["revision": 4, "city": "First"]) }
        _ = try applier.apply(SyncResponse(maxRevision: 4, changeSets: [ack]), to: store, sent: [1])
        #expect(try store.record("teams", id: 10)?["city"] == "Second")
        #expect(try store.record("teams", id: 10)?.revision == 4)
        #expect(try store.outbox().map(\.seq) == [2])
    }

    @Test func anOwnChangeSetUnderTheSeqOfAnUnsentEditDoesNotAcknowledgeIt() throws {
        // A file restored from a backup, before the engine learnt the server's counters: a new
        // edit took seq 1 and temporary id -1, which the server had committed as other content
        // (from the lost later copy of the file). The catch-up of a request that did not carry
        // the edit brings that change set back.
        let store = try seededStore()
        let player = try edit(store) { tx in
            try tx.update("teams", id: 10, ["name": "Mine"])
            return try tx.create("players", ["team_id": 10, "number": 3])
        }.value
        let lost = ChangeSet.committed(4, seq: 1) { cs in
            cs.create("players", 150, [ReservedAttribute.oldId: .integer(player), "revision": 4, "team_id": 10, "number": 40])
        }
        let pendingBefore = try store.outbox()
        let outcome = try applier.apply(SyncResponse(maxRevision: 4, changeSets: [lost]), to: store, sent: [])

        #expect(outcome.acknowledged.isEmpty)
        #expect(try store.outbox() == pendingBefore, "the edit is still to be sent, unchanged")
        #expect(try store.record("teams", id: 10)?["name"] == "Mine")
        #expect(try store.record("players", id: player)?["number"] == 3, "the edit's own record is not taken for the server's")
        #expect(try store.temporaryIdMapping(player) == nil)
        #expect(try store.record("players", id: 150)?["number"] == 40, "the server's change set is applied as committed")
        #expect(try store.meta().nextSeq == 2 && store.meta().nextTemporaryId < player, "new edits take neither again")

        // Sent, the same change set is its acknowledgement (a true retry) and maps the id.
        let again = try applier.apply(SyncResponse(maxRevision: 4, changeSets: [lost]), to: store, sent: [1])
        #expect(again.acknowledged == [1])
        #expect(try store.outbox().isEmpty)
        #expect(try store.temporaryIdMapping(player) == TemporaryIdMapping(entity: "players", id: 150))
    }

    @Test func aPendingDeleteStaysDeletedOverCatchUp() throws {
        let store = try seededStore()
        try edit(store) { tx in try tx.delete("teams", id: 10) }
        let catchUp = ChangeSet.committed(4) { cs in
            cs.update("teams", 10, ["revision": 4, "city": "York"])
            cs.create("players", 70, ["revision": 4, "team_id": 10])
        }
        _ = try applier.apply(SyncResponse(maxRevision: 4, changeSets: [catchUp]), to: store, sent: [])
        #expect(try store.record("teams", id: 10) == nil)
        #expect(try store.record("players", id: 70) == nil, "the pending delete cascades over new children too")
        #expect(try store.outbox().count == 1)
    }

    @Test func applyingTheSameResponseTwiceChangesNothingMore() throws {
        let store = try seededStore()
        let player = try edit(store) { tx in try tx.create("players", ["team_id": 10, "number": 1]) }.value
        let response = SyncResponse(maxRevision: 5, changeSets: [
            ChangeSet.committed(4) { cs in cs.update("teams", 10, ["revision": 4, "city": "York"]) },
            ChangeSet.committed(5, seq: 1) { cs in
                cs.create("players", 90, [ReservedAttribute.oldId: .integer(player), "revision": 5, "team_id": 10, "number": 1])
            },
        ])
        _ = try applier.apply(response, to: store, sent: [1])
        let once = store.tables
        let again = try applier.apply(response, to: store, sent: [1])
        #expect(store.tables == once)
        #expect(again.acknowledged.isEmpty)
    }

    @Test func maxRevisionAndMoreAreReported() throws {
        let store = try seededStore()
        let outcome = try applier.apply(SyncResponse(maxRevision: 12, changeSets: [], more: true), to: store, sent: [])
        #expect(outcome.more)
        #expect(outcome.maxRevision == 12)
        #expect(try store.meta().maxRevision == 12)
    }

    @Test func aResyncCorrectiveDropsTheRejectedChangeSetAndLeavesTheRepairToASnapshot() throws {
        let store = try seededStore()
        try store.put("players", DeviceRecord(id: 60, revision: 2, attributes: ["team_id": 10, "user_id": .null, "number": 4, "rating": .null, "active": .null]))
        try edit(store) { tx in try tx.update("leagues", id: 1, ["country": "UK"]) }
        let delete = try #require(try edit(store) { tx in try tx.delete("teams", id: 10) }.changeSet)
        try edit(store) { tx in try tx.update("leagues", id: 1, ["name": "Premier League"]) }
        #expect(try store.record("players", id: 60) == nil, "the local delete cascades")

        let reason = ConflictReason(code: .forbidden, entity: "teams", id: 10, message: "the repair is too large: bootstrap again")
        let ack = ChangeSet.committed(4, seq: 1) { cs in cs.update("leagues", 1, ["revision": 4, "country": "UK"]) }
        let resync = ChangeSet(seq: 2, conflict: true, reason: reason, resync: true)
        let outcome = try applier.apply(SyncResponse(maxRevision: 4, changeSets: [ack, resync]), to: store, sent: [1, 2])

        #expect(outcome.acknowledged == [1])
        #expect(outcome.conflicts == [ConflictNotification(seq: 2, reason: reason, rejected: delete, restored: [:], dropped: [:], resync: true)])
        #expect(outcome.needsResync)
        #expect(try store.meta().needsResync, "stored with the response, so a crash before the snapshot still loads it")
        #expect(try store.meta().maxRevision == 4)
        #expect(try store.outbox().map(\.seq) == [3], "every other pending change set stays")

        // The snapshot repairs what the corrective set could not carry.
        var snapshot = ChangeSet()
        snapshot.create("leagues", 1, ["revision": 4, "name": "Premier", "country": "UK"])
        snapshot.create("teams", 10, ["revision": 3, "league_id": 1, "name": "Owls", "city": "Leeds"])
        snapshot.create("players", 60, ["revision": 2, "team_id": 10, "number": 4])
        try SnapshotLoader.load(SyncResponse(maxRevision: 4, changeSets: [snapshot]), into: store, schema: TestSchema.schema)
        #expect(try !store.meta().needsResync)
        #expect(try store.record("teams", id: 10)?["name"] == "Owls")
        #expect(try store.record("players", id: 60)?["number"] == 4, "the locally cascaded delete is undone")
        #expect(try store.record("leagues", id: 1)?["name"] == "Premier League", "pending edits stay on top")
    }

    @Test func pendingChangeSetsASnapshotHoldsAreNotReplayedOverIt() throws {
        let store = try seededStore()
        try edit(store) { tx in try tx.update("teams", id: 10, ["name": "Mine"]) }  // seq 1: committed, its answer lost
        try edit(store) { tx in try tx.update("leagues", id: 1, ["country": "Wales"]) }  // seq 2: never sent

        // The snapshot holds seq 1 (at revision 5) and another device's later write (revision 7).
        var snapshot = ChangeSet()
        snapshot.create("leagues", 1, ["revision": 4, "name": "Premier", "country": "UK"])
        snapshot.create("teams", 10, ["revision": 7, "league_id": 1, "name": "Theirs", "city": "Leeds"])
        try SnapshotLoader.load(SyncResponse(maxRevision: 7, changeSets: [snapshot], lastSeq: 1), into: store, schema: TestSchema.schema)
        #expect(try store.record("teams", id: 10)?["name"] == "Theirs", "seq 1 is in the snapshot: not replayed")
        #expect(try store.record("leagues", id: 1)?["country"] == "Wales", "seq 2 is not: replayed")
        #expect(try store.outbox().map(\.seq) == [1, 2], "both stay pending until answered")
        #expect(try store.meta().committedThrough == 1)

        // Its acknowledgement, a repeat below the snapshot's revision, leaves the records as they are.
        let repeated = ChangeSet.committed(5, seq: 1) { cs in cs.update("teams", 10, ["revision": 5, "name": "Mine"]) }
        let outcome = try applier.apply(SyncResponse(maxRevision: 7, changeSets: [repeated]), to: store, sent: [1, 2])
        #expect(outcome.acknowledged == [1])
        #expect(try store.record("teams", id: 10)?["name"] == "Theirs")
        #expect(try store.record("leagues", id: 1)?["country"] == "Wales")

        // Without `lastSeq` (a server from before it) every pending change set is replayed, as before.
        let older = try seededStore()
        try edit(older) { tx in try tx.update("teams", id: 10, ["name": "Mine"]) }
        try SnapshotLoader.load(SyncResponse(maxRevision: 7, changeSets: [snapshot]), into: older, schema: TestSchema.schema)
        #expect(try older.record("teams", id: 10)?["name"] == "Mine")
    }

    /// A page that ends before the request's own acknowledgements (the catch-up limit) still
    /// carries the corrective sets of its rejected change sets: the outbox keeps the acknowledged
    /// ones around holes. A database restored then forgets them all; the request carrying them
    /// is refused at the first hole (`sequence_gap`, `expected` counting the change sets before
    /// it), and only those after it are renumbered. (The soak found a device stuck there for good:
    /// the whole outbox was renumbered only when every pending seq lay above `expected`.)
    @Test func aGapAfterPendingChangeSetsRenumbersOnlyThoseFromTheGapOn() throws {
        let store = try seededStore()
        for city in ["A", "B", "C", "D", "E"] {
            try edit(store) { tx in try tx.update("teams", id: 10, ["city": .string(city)]) }
        }
        #expect(try store.outbox().map(\.seq) == [1, 2, 3, 4, 5])
        // The answer's page holds another device's commit and ends there; seqs 3 and 5 were rejected.
        let other = ChangeSet.committed(4) { cs in cs.create("notes", 300, ["revision": 4, "body": "theirs"]) }
        let rejected = [Int64(3), 5].map { seq in
            ChangeSet.corrective(seq: seq, .staleRevision) { cs in cs.update("teams", 10, ["revision": 2, "city": "Server"]) }
        }
        _ = try applier.apply(SyncResponse(maxRevision: 4, changeSets: [other] + rejected, more: true), to: store, sent: [1, 2, 3, 4, 5])
        #expect(try store.outbox().map(\.seq) == [1, 2, 4])
        try edit(store) { tx in try tx.update("teams", id: 10, ["city": "F"]) }  // seq 6

        // The server forgot seqs 1…5: [1, 2, 4, 6] is refused at 4, expecting 3.
        #expect(try OutboxRenumbering.renumber(store, from: 3))
        #expect(try store.outbox().map(\.seq) == [1, 2, 3, 4])
        #expect(try store.outbox().map { $0.entities["teams"]?.attributes[10]?["city"] } == ["A", "B", "D", "F"])
        #expect(try store.meta().nextSeq == 5)
        #expect(try !OutboxRenumbering.renumber(store, from: 3), "nothing left to close")
        // Expecting the first pending seq (a server that counted from its own last): the same.
        try edit(store) { tx in try tx.update("teams", id: 10, ["city": "G"]) }  // seq 5
        try store.removeFromOutbox(seq: 2)
        #expect(try OutboxRenumbering.renumber(store, from: 1))
        #expect(try store.outbox().map(\.seq) == [1, 2, 3, 4])
        #expect(try store.outbox().map { $0.entities["teams"]?.attributes[10]?["city"] } == ["A", "D", "F", "G"])
    }

    @Test func aSnapshotsLastSeqMovesTheNextSeqPastItAndChangeSetsRenumberedBelowItAreReplayed() throws {
        let store = try seededStore()
        var meta = try store.meta()
        meta.nextSeq = 5
        try store.setMeta(meta)
        try edit(store) { tx in try tx.update("teams", id: 10, ["name": "Mine"]) }  // seq 5
        var snapshot = ChangeSet()
        snapshot.create("teams", 10, ["revision": 7, "league_id": 1, "name": "Theirs", "city": "Leeds"])
        // The server had handled seqs through 8 (an older copy of the file knew of fewer).
        try SnapshotLoader.load(SyncResponse(maxRevision: 7, changeSets: [snapshot], lastSeq: 8), into: store, schema: TestSchema.schema)
        #expect(try store.meta().nextSeq == 9)
        #expect(try store.record("teams", id: 10)?["name"] == "Theirs")

        // The server then forgets them (`sequence_gap`, expecting 3): renumbered, none is in the records.
        #expect(try OutboxRenumbering.renumber(store, from: 3))
        #expect(try store.outbox().map(\.seq) == [3])
        #expect(try store.meta().committedThrough == 2)
        _ = try applier.apply(SyncResponse(maxRevision: 7, changeSets: []), to: store, sent: [])
        #expect(try store.record("teams", id: 10)?["name"] == "Mine", "replayed again: the server no longer has it")
    }

    @Test func anOrdinaryCorrectiveAsksForNoSnapshot() throws {
        let store = try seededStore()
        try edit(store) { tx in try tx.update("teams", id: 10, ["name": "Mine"]) }
        let corrective = ChangeSet.corrective(seq: 1, .staleRevision) { cs in
            cs.update("teams", 10, ["revision": 8, "league_id": 1, "name": "Theirs", "city": "Hull"])
        }
        let outcome = try applier.apply(SyncResponse(maxRevision: 8, changeSets: [corrective]), to: store, sent: [1])
        #expect(!outcome.needsResync)
        #expect(outcome.conflicts.map(\.resync) == [false])
        #expect(try !store.meta().needsResync)
    }
}
