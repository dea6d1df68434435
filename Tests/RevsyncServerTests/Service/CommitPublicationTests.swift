import Foundation
import Synchronization
import RevsyncRules
import RevsyncTestSupport
import RevsyncWire
import Testing
@testable import RevsyncServer

/// A batch's entries reach the cache (`ChangeLog.didCommit`) in commit order, while the next
/// batch is already being applied; its requests are answered only once they are there.
@Suite struct CommitPublicationTests {
    /// The in-memory log, whose first publication waits for the test to open a gate.
    final class GatedChangeLog: ChangeLog {
        let dataset: InMemoryDataset
        let published = Mutex<[[Int64]]>([])
        let gate = CommitPromise()

        init(_ dataset: InMemoryDataset) { self.dataset = dataset }

        func state() async throws -> LogState { try await dataset.state() }
        func authoritativeState() async throws -> LogState { try await dataset.authoritativeState() }
        func entries(after revision: Int64, through head: Int64, for device: Device, limits: CatchUpLimits, form: EntryForm, own: Set<Int64>) async throws -> CatchUpPage {
            try await dataset.entries(after: revision, through: head, for: device, limits: limits, form: form, own: own)
        }
        func authorEntries(_ revisions: [Int64], for device: Device) async throws -> [LogEntry] { try await dataset.authorEntries(revisions, for: device) }

        func didCommit(_ entries: [CommittedEntry]) async {
            if published.withLock({ $0.isEmpty }) { _ = await gate.next() }
            published.withLock { $0.append(entries.map(\.revision)) }
        }
    }

    @Test func theNextBatchCommitsWhileOneIsPublishedAndBothArePublishedAndAnsweredInOrder() async throws {
        let harness = ServiceHarness()
        let log = GatedChangeLog(harness.dataset)
        let applier = ChangeSetApplier(store: harness.dataset, schema: harness.schema, limits: ServerSettings.Limits())
        let committer = Committer(applier: applier, changeLog: log, batchSize: 1, batchWait: .zero)
        let first = harness.device(2, role: "admin"), second = harness.device(3, role: "admin")
        func league(_ name: String) -> ChangeSet {
            changeSet(seq: 1, ("leagues", EntityChanges(create: [-1], attributes: [-1: ["name": .string(name)]])))
        }
        let answered = Answered()
        async let a: [ApplyOutcome] = {
            defer { answered.names.withLock { $0.append("a") } }
            return try await committer.apply([league("A")], device: first)
        }()
        // Until the first batch committed; its publication now waits at the gate.
        try await until { harness.head == 1 }
        async let b: [ApplyOutcome] = {
            defer { answered.names.withLock { $0.append("b") } }
            return try await committer.apply([league("B")], device: second)
        }()
        // Whatever is expected below, the gate opens before the requests are awaited at the end.
        defer { log.gate.send(.lead) }
        try await until { harness.head == 2 }
        // Time for a wrong publication or answer to happen, if one were going to.
        try await Task.sleep(for: .milliseconds(100))
        #expect(log.published.withLock { $0 }.isEmpty, "the second batch was published before the first")
        #expect(answered.names.withLock { $0 }.isEmpty, "a request was answered before its entries were published")
        log.gate.send(.lead)
        let (outcomesA, outcomesB) = try await (a, b)
        #expect(outcomesA.map(\.revision) == [1] && outcomesB.map(\.revision) == [2])
        #expect(log.published.withLock { $0 } == [[1], [2]])
    }

    final class Answered: Sendable {
        let names = Mutex<[String]>([])
    }

    /// Polls `condition` for up to five seconds.
    func until(_ condition: () -> Bool) async throws {
        for _ in 0..<500 where !condition() { try await Task.sleep(for: .milliseconds(10)) }
        try #require(condition(), "the condition did not come true within 5 s")
    }
}
