import RevsyncRules
import RevsyncWire
import Testing
@testable import RevsyncServer

/// Idempotency and order (`seq`), acknowledgements and corrective sets of repeats,
/// through `SyncService` on in-memory stores.
@Suite struct SyncServiceSeqTests {
    func note(_ seq: Int64, _ temporary: Int64, _ text: String) -> ChangeSet {
        changeSet(seq: seq, ("users", EntityChanges(create: [temporary], attributes: [temporary: ["first_name": .string(text), "last_name": "X"]])))
    }

    @Test func aRepeatedSeqReplaysItsAcknowledgementAndAppliesNothingTwice() async throws {
        let harness = ServiceHarness()
        let member = harness.device(2)
        let first = try await harness.sync(member, from: 0, [note(1, -1, "Ada")])
        let again = try await harness.sync(member, from: 1, [note(1, -1, "Ada")])
        #expect(harness.head == 1 && harness.count("users") == 1)
        // Asked for again although the device is past it, the acknowledgement comes back whole.
        #expect(again.changeSets.count == 1)
        #expect(again.changeSets.first?.revision == first.changeSets.first?.revision)
        #expect(again.changeSets.first?.entities["users"]?.attributes.values.first?[ReservedAttribute.oldId] == .integer(-1))
    }

    @Test func aPrunedAcknowledgementIsRebuiltFromWhatTheSetCreated() async throws {
        let harness = ServiceHarness()
        let member = harness.device(2)
        _ = try await harness.sync(member, from: 0, [note(1, -1, "Ada")])
        _ = try await harness.sync(member, from: 1, [note(2, -2, "Bea")])
        harness.dataset.withState { $0.prune(retention: 0) }
        let again = try await harness.sync(member, from: 2, [note(1, -1, "Ada")])
        let ack = try #require(again.changeSets.first)
        #expect(ack.revision == 1 && ack.seq == 1 && ack.conflict == false)
        #expect(ack.entities["users"]?.attributes.values.first?[ReservedAttribute.oldId] == .integer(-1))
        #expect(ack.entities["users"]?.attributes.values.first?["first_name"] == "Ada")
    }

    @Test func aRepeatedRejectionGetsAFreshCorrectiveSet() async throws {
        let harness = ServiceHarness()
        let member = harness.device(2)
        let league = changeSet(seq: 1, ("leagues", EntityChanges(create: [-1], attributes: [-1: ["name": "Mine"]])))
        let first = try await harness.sync(member, from: 0, [league])
        let again = try await harness.sync(member, from: 0, [league])
        #expect(first.changeSets.last?.reason?.code == .forbidden)
        #expect(again.changeSets.last?.reason?.code == .forbidden)
        #expect(again.changeSets.last?.entities["leagues"]?.delete == [-1])
    }

    @Test func seqsMustIncreaseFromOneWithoutAGap() async throws {
        let harness = ServiceHarness()
        let member = harness.device(2)
        #expect(try await harness.refusal(member, from: 0, [note(2, -1, "A"), note(1, -2, "B")])?.code == .invalidRequest)
        #expect(try await harness.refusal(member, from: 0, [note(0, -1, "A")])?.code == .invalidRequest)
        let gap = try await harness.refusal(member, from: 0, [note(2, -1, "A")])
        #expect(gap?.code == .sequenceGap && gap?.expected == 1)
        #expect(harness.head == 0)
    }

    @Test func aSeqNamingAnotherChangeSetIsRefusedBeforeAnythingApplies() async throws {
        let harness = ServiceHarness()
        let member = harness.device(2)
        _ = try await harness.sync(member, from: 0, [note(1, -1, "Ada")])
        let reused = try await harness.refusal(member, from: 1, [note(1, -5, "Other"), note(2, -6, "New")])
        #expect(reused?.code == .seqReused && reused?.seq == 1 && reused?.expected == 2 && reused?.lowestTemporaryId == -1)
        #expect(harness.head == 1 && harness.count("users") == 1)
    }

    @Test func aRejectionPrunedWithTheLogCannotBeReplayed() async throws {
        let harness = ServiceHarness()
        let member = harness.device(2)
        let league = changeSet(seq: 1, ("leagues", EntityChanges(create: [-1], attributes: [-1: ["name": "Mine"]])))
        _ = try await harness.sync(member, from: 0, [league])
        _ = try await harness.sync(harness.admin, from: 0, [note(1, -1, "Ada")])
        harness.dataset.withState { $0.prune(retention: 0) }
        let refused = try await harness.refusal(member, from: 1, [league])
        #expect(refused?.code == .seqReused)
    }

    @Test func aChangeSetWithoutSeqAppliesEveryTimeButItsTemporaryIdsOnlyOnce() async throws {
        let harness = ServiceHarness()
        let member = harness.device(2)
        let set = changeSet(seq: nil, ("users", EntityChanges(create: [-1], attributes: [-1: ["first_name": "A", "last_name": "B"]])))
        _ = try await harness.sync(member, from: 0, [set])
        let again = try await harness.sync(member, from: 1, [set])
        #expect(again.changeSets.last?.reason?.code == .invalid)
        #expect(harness.count("users") == 1)
    }

    @Test func aRevokedDeviceIsRefused() async throws {
        let harness = ServiceHarness()
        let member = harness.device(2)
        harness.dataset.withState { $0.devices[2]?.revoked = true }
        let refused = try await harness.refusal(member, from: 0, [note(1, -1, "A")])
        #expect(refused == SyncRefusal.deviceRevoked)
        #expect(harness.head == 0)
    }
}
