import RevsyncRules
import RevsyncWire
import Testing
@testable import RevsyncServer

/// Envelope errors, catch-up limits and `more`, and corrective set budgets, through
/// `SyncService` on in-memory stores.
@Suite struct SyncServiceEnvelopeTests {
    func user(_ seq: Int64, _ name: String) -> ChangeSet {
        changeSet(seq: seq, ("users", EntityChanges(create: [-seq], attributes: [-seq: ["first_name": .string(name), "last_name": "X"]])))
    }

    @Test func maxRevisionMustLieBetweenTheHorizonAndTheHead() async throws {
        let harness = ServiceHarness()
        let member = harness.device(2)
        #expect(try await harness.refusal(member, from: -1)?.code == .invalidRequest)
        #expect(try await harness.refusal(member, from: 1)?.code == .revisionAhead)
        _ = try await harness.sync(harness.admin, from: 0, [user(1, "A"), user(2, "B")])
        harness.dataset.withState { $0.prune(retention: 1) }
        #expect(try await harness.refusal(member, from: 0)?.code == .snapshotRequired)
        #expect(try await harness.sync(member, from: 1).changeSets.count == 1)
    }

    @Test func requestsOverTheirLimitsAreTooLarge() async throws {
        let harness = ServiceHarness {
            $0.maxChangeSetsPerRequest = 2
            $0.maxOperationsPerRequest = 3
        }
        let member = harness.device(2)
        #expect(try await harness.refusal(member, from: 0, [user(1, "A"), user(2, "B"), user(3, "C")])?.code == .tooLarge)
        let four = changeSet(seq: 1, ("users", EntityChanges(create: [-1, -2, -3, -4], attributes: [
            -1: ["first_name": "A", "last_name": "X"], -2: ["first_name": "B", "last_name": "X"],
            -3: ["first_name": "C", "last_name": "X"], -4: ["first_name": "D", "last_name": "X"],
        ])))
        #expect(try await harness.refusal(member, from: 0, [four])?.code == .tooLarge)
    }

    @Test func aChangeSetOverTheOperationLimitIsRejectedAsInvalid() async throws {
        let harness = ServiceHarness { $0.maxOperationsPerChangeSet = 1 }
        let two = changeSet(seq: 1, ("users", EntityChanges(create: [-1, -2], attributes: [
            -1: ["first_name": "A", "last_name": "X"], -2: ["first_name": "B", "last_name": "X"],
        ])))
        #expect(try await harness.sync(harness.admin, from: 0, [two]).changeSets.last?.reason?.code == .invalid)
    }

    @Test func catchUpStopsAtItsLimitsAndSaysMore() async throws {
        let harness = ServiceHarness { $0.catchUpMaxChangeSets = 2 }
        for seq in Int64(1)...5 { _ = try await harness.sync(harness.admin, from: seq - 1, [user(seq, "U\(seq)")]) }
        let member = harness.device(2)
        var position: Int64 = 0
        var pages = 0
        while true {
            let page = try await harness.sync(member, from: position)
            pages += 1
            #expect(page.changeSets.map(\.revision) == Array(position + 1...page.maxRevision).map { Optional($0) })
            position = page.maxRevision
            if page.more != true { break }
        }
        #expect(position == 5 && pages == 3)

        let bytes = ServiceHarness { $0.catchUpMaxBytes = 10 }
        for seq in Int64(1)...3 { _ = try await bytes.sync(bytes.admin, from: seq - 1, [user(seq, "U\(seq)")]) }
        // One entry is always sent, however large.
        let one = try await bytes.sync(bytes.device(2), from: 0)
        #expect(one.changeSets.count == 1 && one.more == true)
    }

    @Test func repairsOverTheirBudgetBecomeResyncInstructions() async throws {
        let harness = ServiceHarness { $0.maxCorrectiveBytes = 200 }
        let seeded = try await harness.seed()
        let long = String(repeating: "n", count: 300)
        _ = try await harness.sync(harness.admin, from: 1, [changeSet(
            seq: 2, ("teams", EntityChanges(update: [seeded.team], attributes: [seeded.team: ["revision": 1, "city": .string(long)]])))])
        let member = harness.device(2)
        let stale = changeSet(seq: 1, ("teams", EntityChanges(update: [seeded.team], attributes: [seeded.team: ["revision": 1, "city": "Bern"]])))
        let response = try await harness.sync(member, from: 2, [stale])
        let corrective = try #require(response.changeSets.last)
        #expect(corrective.reason?.code == .staleRevision)
        #expect(corrective.resync == true && corrective.types.isEmpty)
    }
}
