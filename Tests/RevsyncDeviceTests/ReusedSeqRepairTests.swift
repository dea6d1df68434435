import RevsyncWire
import Testing

@testable import RevsyncDevice

/// The pure rules behind `seq_reused`: finding the first change set the server
/// refuses, renumbering from it with fresh temporary ids, and moving counters.
@Suite("Reused seqs: search, repair, counters")
struct ReusedSeqRepairTests {
    // MARK: Repair

    /// seq 3 a retry (update), seq 4 creates a user and a player referencing it,
    /// seq 5 creates a note on that player and updates both.
    private func restoredStore() throws -> (InMemoryRecordStore, user: Int64, player: Int64, note: Int64) {
        let store = try seededStore()
        try store.setMeta(DeviceMeta(maxRevision: 3, nextSeq: 3, nextTemporaryId: -4, bootstrapped: true))
        try edit(store) { tx in try tx.update("teams", id: 10, ["city": "Retry"]) }
        let (user, player) = try edit(store) { tx in
            let user = try tx.create("users", ["first_name": "Ana"])
            return (user, try tx.create("players", ["team_id": 10, "user_id": .integer(user), "number": 9]))
        }.value
        let note = try edit(store) { tx in
            try tx.update("players", id: player, ["number": 10])
            try tx.update("users", id: user, ["first_name": "Ana B"])
            return try tx.create("notes", ["player_id": .integer(player), "body": "SECOND different edit"])
        }.value
        return (store, user, player, note)
    }

    @Test func theFirstReusedAndEveryLaterChangeSetAreRenumberedAfterTheServersSeqs() throws {
        let (store, _, _, _) = try restoredStore()
        #expect(try store.outbox().map(\.seq) == [3, 4, 5])
        let retry = try #require(try store.outbox().first)

        let result = try #require(
            try store.atomically {
                try ReusedSeqRepair.repair(store, schema: TestSchema.schema, from: 4, expected: 9, lowestTemporaryId: -20)
            })
        #expect(result.seqs == [4: 9, 5: 10])
        #expect(try store.outbox().map(\.seq) == [3, 9, 10])
        #expect(try store.outbox().first == retry, "the retry before the first reused seq is untouched")
        #expect(try store.meta().nextSeq == 11)
    }

    @Test func recordsCreatedByRenumberedChangeSetsGetFreshTemporaryIdsEverywhere() throws {
        let (store, user, player, note) = try restoredStore()
        let result = try #require(
            try store.atomically {
                try ReusedSeqRepair.repair(store, schema: TestSchema.schema, from: 4, expected: 9, lowestTemporaryId: -20)
            })
        // Below the server's lowest (-20), in creation order.
        #expect(result.renamed == [
            TemporaryIdRename(entity: "users", from: user, to: -21),
            TemporaryIdRename(entity: "players", from: player, to: -22),
            TemporaryIdRename(entity: "notes", from: note, to: -23),
        ])
        #expect(try store.meta().nextTemporaryId == -24)

        // The records moved, references to them followed.
        #expect(try store.record("users", id: user) == nil)
        #expect(try store.record("players", id: player) == nil)
        #expect(try store.record("notes", id: note) == nil)
        #expect(try store.record("users", id: -21)?["first_name"] == "Ana B")
        let movedPlayer = try #require(try store.record("players", id: -22))
        #expect(movedPlayer["user_id"] == -21 && movedPlayer["number"] == 10)
        #expect(try store.record("notes", id: -23)?["player_id"] == -22)
        #expect(result.changes.deleted["players"] == [player] && result.changes.upserted["players"] == [-22])
        #expect(try store.currentId(of: "players", player) == -22, "the old id still finds the record")
        #expect(try edit(store) { tx in try tx.record("users", id: user)?.id }.value == -21)

        // The outbox says the same: creates, attribute keys, references, updates.
        let outbox = try store.outbox()
        let creating = outbox[1]
        #expect(creating.entities["users"]?.create == [-21])
        #expect(creating.entities["players"]?.create == [-22])
        #expect(creating.entities["players"]?.attributes[-22]?["user_id"] == -21)
        let updating = outbox[2]
        #expect(updating.entities["players"]?.update == [-22])
        #expect(updating.entities["players"]?.attributes[-22]?["number"] == 10)
        #expect(updating.entities["users"]?.update == [-21])
        #expect(updating.entities["notes"]?.create == [-23])
        #expect(updating.entities["notes"]?.attributes[-23]?["player_id"] == -22)
    }

    @Test func freshTemporaryIdsGoBelowTheLocalCounterWhenItIsLowerThanTheServers() throws {
        let (store, user, _, _) = try restoredStore()
        var meta = try store.meta()
        meta.nextTemporaryId = -50
        try store.setMeta(meta)
        let result = try ReusedSeqRepair.repair(store, schema: TestSchema.schema, from: 4, expected: 9, lowestTemporaryId: -3)
        #expect(result?.renamed.first == TemporaryIdRename(entity: "users", from: user, to: -50))
        #expect(try store.meta().nextTemporaryId == -53)
    }

    @Test func aServerWithNoTemporaryIdsStillGetsIdsBelowTheDevicesOwn() throws {
        let (store, _, _, _) = try restoredStore()
        let result = try ReusedSeqRepair.repair(store, schema: TestSchema.schema, from: 5, expected: 6, lowestTemporaryId: 0)
        #expect(result?.seqs == [5: 6])
        #expect(result?.renamed.map(\.to) == [-7], "the local counter was at -7")
        #expect(try store.outbox().map(\.seq) == [3, 4, 6])
    }

    @Test func nothingIsRepairedWithoutAReusedPendingChangeSet() throws {
        let (store, _, _, _) = try restoredStore()
        let before = try store.outbox()
        #expect(try ReusedSeqRepair.repair(store, schema: TestSchema.schema, from: 6, expected: 9, lowestTemporaryId: -20) == nil)
        #expect(try ReusedSeqRepair.repair(store, schema: TestSchema.schema, from: 4, expected: 4, lowestTemporaryId: -20) == nil)
        #expect(try store.outbox() == before)
        #expect(try store.meta().nextSeq == 6)
    }

    @Test func anAcknowledgementOfTheRepairedChangeSetsMapsTheirNewIds() throws {
        let (store, _, player, note) = try restoredStore()
        try ReusedSeqRepair.repair(store, schema: TestSchema.schema, from: 4, expected: 9, lowestTemporaryId: -20)
        let ack9 = ChangeSet.committed(5, seq: 9) { cs in
            cs.create("users", 200, ["revision": 5, "__oldId__": -21, "first_name": "Ana", "date_of_birth": .null])
            cs.create("players", 201, ["revision": 5, "__oldId__": -22, "team_id": 10, "user_id": 200, "number": 9])
        }
        let ack10 = ChangeSet.committed(6, seq: 10) { cs in
            cs.update("players", 201, ["revision": 6, "number": 10])
            cs.update("users", 200, ["revision": 6, "first_name": "Ana B"])
            cs.create("notes", 202, ["revision": 6, "__oldId__": -23, "player_id": 201, "body": "SECOND different edit"])
        }
        // The lost copy of the file had made a player under the same temporary id (seq 4 then).
        let lost = ChangeSet.committed(4, seq: 4) { cs in
            cs.create("players", 150, ["revision": 4, "__oldId__": .integer(player), "team_id": 10, "number": 1])
        }
        let outcome = try ResponseApplier(schema: TestSchema.schema).apply(
            SyncResponse(maxRevision: 6, changeSets: [lost, ack9, ack10]), to: store, sent: [9, 10])
        #expect(outcome.acknowledged == [9, 10])
        #expect(try store.outbox().map(\.seq) == [3])
        #expect(try store.record("notes", id: 202)?["player_id"] == 201)
        #expect(try store.records("players", matching: .all).map(\.id) == [150, 201])
        // The ids the app held before the repair still find its own records, not the lost copy's.
        #expect(try store.temporaryIdMapping(player)?.id == 150)
        #expect(try store.currentId(of: "players", player) == 201)
        #expect(try store.currentId(of: "notes", note) == 202)
    }

    // MARK: Search

    /// Runs a search against a server that refuses a run when it holds any of `refused`.
    private func run(_ search: ReusedSeqSearch, window: Int, refused: Set<Int64>) -> (ReusedSeqSearch.Step, probes: [ClosedRange<Int64>]) {
        var search = search
        var probes: [ClosedRange<Int64>] = []
        while true {
            let step = search.next(window: window)
            guard case .probe(let seqs) = step else { return (step, probes) }
            probes.append(seqs)
            #expect(search.suspects.filter(seqs.contains).count <= window)
            search.record(refused: search.suspects.contains { seqs.contains($0) && refused.contains($0) })
        }
    }

    @Test func aRefusedRequestIsBisectedToItsFirstNewChangeSet() {
        let search = ReusedSeqSearch(suspects: Array(1...8), refusedThrough: 8)
        let (step, probes) = run(search, window: 100, refused: [6, 7, 8])
        #expect(step == .firstReused(6))
        #expect(probes == [1...4, 5...6, 5...5])
    }

    @Test func aRefusedRequestWithOneSuspectNeedsNoProbe() {
        let search = ReusedSeqSearch(suspects: [4, 5], refusedThrough: 4)
        #expect(run(search, window: 100, refused: [4]).0 == .firstReused(4))
        #expect(run(search, window: 100, refused: [4]).probes.isEmpty)
    }

    @Test func theImpostorFoundIsAlwaysRefusedAndEverythingBeforeItProvenEvenOutOfOrder() {
        // A retry whose outcome the server no longer keeps is refused too, ahead of true retries.
        var search = ReusedSeqSearch(suspects: Array(1...6), refusedThrough: 6)
        let (step, _) = run(search, window: 100, refused: [2, 5])
        #expect(step == .firstReused(2))
        while case .probe(let seqs) = search.next(window: 100) {
            search.record(refused: seqs.contains(2) || seqs.contains(5))
        }
        #expect(search.provenRetries == [1])
    }

    @Test func withoutARefusalSuspectsAreCheckedInRunsOfOneRequest() {
        let search = ReusedSeqSearch(suspects: Array(1...7))
        let allRetries = run(search, window: 3, refused: [])
        #expect(allRetries.0 == .noneReused)
        #expect(allRetries.probes == [1...3, 4...6, 7...7])
        let someNew = run(search, window: 3, refused: [5, 6, 7])
        #expect(someNew.0 == .firstReused(5))
        #expect(someNew.probes == [1...3, 4...6, 4...5, 4...4])
        var empty = ReusedSeqSearch(suspects: [])
        #expect(empty.next(window: 3) == .noneReused)
    }

    // MARK: Counters

    @Test func countersMovePastTheServersAndNeverBack() {
        let behind = DeviceMeta(maxRevision: 9, nextSeq: 4, nextTemporaryId: -3, bootstrapped: true)
        let moved = behind.movedPast(lastSeq: 10, lowestTemporaryId: -8)
        #expect(moved.nextSeq == 11 && moved.nextTemporaryId == -9)
        #expect(moved.maxRevision == 9 && moved.bootstrapped)
        let ahead = DeviceMeta(nextSeq: 20, nextTemporaryId: -30)
        #expect(ahead.movedPast(lastSeq: 10, lowestTemporaryId: -8) == ahead)
        #expect(DeviceMeta().movedPast(lastSeq: 0, lowestTemporaryId: 0) == DeviceMeta(), "a new device: nothing to move")
    }

    @Test func anOwnChangeSetWithASeqThisFileNeverIssuedMovesTheCounters() throws {
        let store = try seededStore()
        try store.setMeta(DeviceMeta(maxRevision: 3, nextSeq: 2, nextTemporaryId: -2, bootstrapped: true))
        // The server's catch-up carries change sets this device made from a later copy of its file.
        let later = ChangeSet.committed(7, seq: 5) { cs in
            cs.create("leagues", 300, ["revision": 7, "__oldId__": -6, "name": "From the lost copy"])
        }
        _ = try ResponseApplier(schema: TestSchema.schema).apply(SyncResponse(maxRevision: 7, changeSets: [later]), to: store, sent: [])
        #expect(try store.meta().nextSeq == 6)
        #expect(try store.meta().nextTemporaryId == -7)
        #expect(try store.record("leagues", id: 300)?["name"] == "From the lost copy")
    }
}
