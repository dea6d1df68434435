import Foundation
import RevsyncRules
import RevsyncTestSupport
import RevsyncWire
import Testing
@testable import RevsyncServer

/// Group commit's batches over in-memory stores: every change set of a batch is judged on
/// the facts it would see alone, and one that depends on an earlier one of its batch waits.
@Suite struct BatchApplyTests {
    let harness = ServiceHarness()
    var applier: ChangeSetApplier { ChangeSetApplier(store: harness.dataset, schema: harness.schema, limits: ServerSettings.Limits()) }

    func items(_ sets: [(ChangeSet, Device)]) -> [BatchItem] {
        sets.enumerated().map { index, pair in
            var item = applier.item(pair.0, device: pair.1)
            item.job = index
            return item
        }
    }

    func note(_ seq: Int64, _ body: String) -> ChangeSet {
        changeSet(seq: seq, ("notes", EntityChanges(create: [-seq], attributes: [-seq: ["body": .string(body), "pinned": false]])))
    }

    func rename(_ seq: Int64, team: Int64, basis: Int64, _ name: String) -> ChangeSet {
        changeSet(seq: seq, ("teams", EntityChanges(update: [team], attributes: [team: ["revision": .integer(basis), "name": .string(name)]])))
    }

    func revision(_ result: BatchResult) -> Int64? {
        if case .done(.applied(let revision, _, _)) = result { return revision }
        return nil
    }

    func isDeferred(_ result: BatchResult) -> Bool {
        if case .deferred = result { return true }
        return false
    }

    @Test func independentChangeSetsShareOneBatchAndTakeConsecutiveRevisionsInQueueOrder() async throws {
        let seeded = try await harness.seed()
        let devices = (2...5).map { harness.device(Int64($0)) }
        let results = try await applier.apply(items(devices.map { (note(1, "from \($0.id)"), $0) }))
        #expect(results.map(revision) == (1...4).map { seeded.revision + Int64($0) })
        #expect(harness.head == seeded.revision + 4)
        #expect(harness.dataset.withState { $0.devices[3]?.lastSeq } == 1)
    }

    @Test func twoChangeSetsReferencingOneParentGoTogether() async throws {
        let seeded = try await harness.seed()
        let a = harness.device(2), b = harness.device(3)
        func player(_ number: Int) -> ChangeSet {
            changeSet(seq: 1, ("players", EntityChanges(create: [-1], attributes: [-1: ["team_id": .integer(seeded.team), "number": .integer(Int64(number))]])))
        }
        let results = try await applier.apply(items([(player(4), a), (player(5), b)]))
        #expect(results.compactMap(revision).count == 2, "reads of one parent do not overlap: \(results)")
    }

    @Test func aChangeSetWritingWhatAnEarlierOneWroteWaitsAndIsThenJudgedOnFreshFacts() async throws {
        let seeded = try await harness.seed()
        let a = harness.device(2, role: "admin"), b = harness.device(3, role: "admin")
        let batch = items([(rename(1, team: seeded.team, basis: seeded.revision, "Owls"), a), (rename(1, team: seeded.team, basis: seeded.revision, "Rooks"), b)])
        let results = try await applier.apply(batch)
        #expect(revision(results[0]) == seeded.revision + 1)
        #expect(isDeferred(results[1]))
        #expect(harness.dataset.withState { $0.devices[3]?.lastSeq } == 0, "a deferred seq is not handled yet")
        // Alone in the next batch it sees a's write: another device changed the team since its basis.
        let next = try await applier.apply(Array(batch[1...]))
        guard case .done(.rejected(let reason, _)) = next[0] else { Issue.record("not rejected: \(next)"); return }
        #expect(reason.code == .staleRevision)
        #expect(harness.values("teams", seeded.team)?["name"] == "Owls")
    }

    @Test func aDeleteOfAParentAnEarlierChangeSetReferencesWaits() async throws {
        let seeded = try await harness.seed()
        let a = harness.device(2, role: "admin"), b = harness.device(3, role: "admin")
        let create = changeSet(seq: 1, ("notes", EntityChanges(create: [-1], attributes: [-1: ["body": "hi", "pinned": false, "player_id": .integer(seeded.player)]])))
        let delete = changeSet(seq: 1, ("players", EntityChanges(delete: [seeded.player], attributes: [seeded.player: ["revision": .integer(seeded.revision)]])))
        let results = try await applier.apply(items([(create, a), (delete, b)]))
        #expect(revision(results[0]) != nil)
        #expect(isDeferred(results[1]))
    }

    @Test func aChangeSetUsingATemporaryIdCreatedEarlierInTheBatchWaits() async throws {
        _ = try await harness.seed()
        let a = harness.device(2)
        let update = changeSet(seq: 2, ("notes", EntityChanges(update: [-1], attributes: [-1: ["revision": .integer(harness.head), "body": "edited"]])))
        var batch = items([(note(1, "first"), a), (update, a)])
        batch[1].job = 0
        let results = try await applier.apply(batch)
        #expect(revision(results[0]) != nil)
        #expect(isDeferred(results[1]))
    }

    @Test func changeSetsOfOneDeviceUsingOneMappedTemporaryIdGoTogether() async throws {
        let seeded = try await harness.seed()
        let a = harness.device(2, role: "admin")
        let team = changeSet(seq: 1, ("teams", EntityChanges(create: [-1], attributes: [-1: ["name": "Owls", "league_id": .integer(seeded.league)]])))
        _ = try await applier.apply(items([(team, a)]))
        func player(_ seq: Int64, _ number: Int64) -> ChangeSet {
            changeSet(seq: seq, ("players", EntityChanges(create: [-seq], attributes: [-seq: ["team_id": -1, "number": .integer(number)]])))
        }
        var batch = items([(player(2, 4), a), (player(3, 5), a)])
        batch[1].job = 0
        let results = try await applier.apply(batch)
        #expect(results.compactMap(revision).count == 2, "using a mapped id is a read, not a create: \(results)")
    }

    @Test func aRepeatOfASeqHandledEarlierInTheBatchWaitsForItsOutcome() async throws {
        _ = try await harness.seed()
        let a = harness.device(2)
        let results = try await applier.apply(items([(note(1, "once"), a), (note(1, "once"), a)]))
        #expect(revision(results[0]) != nil)
        #expect(isDeferred(results[1]))
    }

    @Test func behindADeferredChangeSetNothingOfItsDeviceGoes() async throws {
        let seeded = try await harness.seed()
        let a = harness.device(2, role: "admin"), b = harness.device(3, role: "admin")
        var batch = items([
            (rename(1, team: seeded.team, basis: seeded.revision, "Owls"), a), (rename(1, team: seeded.team, basis: seeded.revision, "Rooks"), b),
            (note(2, "after the deferred one"), b),
        ])
        batch[2].job = 1
        let results = try await applier.apply(batch)
        #expect(isDeferred(results[1]) && isDeferred(results[2]))
        #expect(harness.count("notes") == 0)
    }

    @Test func aRevokedDeviceFailsAloneAndTakesNoRevision() async throws {
        let seeded = try await harness.seed()
        let revoked = harness.device(2), active = harness.device(3)
        harness.dataset.withState { $0.devices[2]?.revoked = true }
        let results = try await applier.apply(items([(note(1, "refused"), revoked), (note(1, "kept"), active)]))
        guard case .failed(let error) = results[0] else { Issue.record("not failed: \(results)"); return }
        #expect(error as? SyncRefusal == .deviceRevoked)
        #expect(revision(results[1]) == seeded.revision + 1)
    }

    @Test func concurrentRequestsGetGapFreeRevisionsAndEachDevicesSeqsInOrder() async throws {
        let harness = ServiceHarness()
        let devices = (2...21).map { harness.device(Int64($0)) }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for device in devices {
                group.addTask {
                    // Two change sets per request, the second editing what the first created.
                    for seq in stride(from: Int64(1), through: 9, by: 2) {
                        let edit = changeSet(seq: seq + 1, ("notes", EntityChanges(update: [-seq], attributes: [-seq: ["revision": 0, "body": "edited"]])))
                        _ = try await harness.sync(device, from: 0, [note(seq, "from \(device.id)"), edit])
                    }
                }
            }
            try await group.waitForAll()
        }
        #expect(harness.head == 200)
        let log = harness.dataset.withState { $0.log }
        #expect(Set(log.keys) == Set(1...200))
        #expect(harness.dataset.withState { state in devices.allSatisfy { state.devices[$0.id]?.lastSeq == 10 } })
        #expect(harness.dataset.withState { $0.records["notes"]?.values.allSatisfy { $0.values["body"] == "edited" } } == true)
    }
}
