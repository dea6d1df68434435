import Foundation
import NIOPosix
import Synchronization
import RevsyncRules
import RevsyncTestSupport
import RevsyncWire
import Testing
@testable import RevsyncServer

/// A batch's entries reach the cache (`ChangeLog.didCommit`) in commit order, while the next
/// batch is already being applied; its requests are answered once this instance holds them,
/// before the cache's write for the other instances ends.
@Suite struct CommitPublicationTests {
    /// The in-memory log, whose first publication's cache write ends when the test opens a gate.
    final class GatedChangeLog: ChangeLog {
        let dataset: InMemoryDataset
        /// Batches given to `didCommit` (held by the instance), and those whose cache write ended.
        let held = Mutex<[[Int64]]>([])
        let published = Mutex<[[Int64]]>([])
        let gate = MultiThreadedEventLoopGroup.singleton.next().makePromise(of: Void.self)
        private let opened = Mutex(false)

        init(_ dataset: InMemoryDataset) { self.dataset = dataset }

        func state() async throws -> LogState { try await dataset.state() }
        func authoritativeState() async throws -> LogState { try await dataset.authoritativeState() }
        func entries(after revision: Int64, through head: Int64, for device: Device, limits: CatchUpLimits, form: EntryForm, own: Set<Int64>) async throws -> CatchUpPage {
            try await dataset.entries(after: revision, through: head, for: device, limits: limits, form: form, own: own)
        }
        func authorEntries(_ revisions: [Int64], for device: Device) async throws -> [LogEntry] { try await dataset.authorEntries(revisions, for: device) }

        /// Opens the gate (once; later calls do nothing).
        func open() {
            guard opened.withLock({ opened in defer { opened = true }; return !opened }) else { return }
            gate.succeed()
        }

        func didCommit(_ entries: [CommittedEntry]) async -> CommitPublication {
            let revisions = entries.map(\.revision)
            let first = held.withLock { held in
                held.append(revisions)
                return held.count == 1
            }
            let written = first ? gate.futureResult : MultiThreadedEventLoopGroup.singleton.next().makeSucceededVoidFuture()
            return CommitPublication(written.map { [self] in published.withLock { $0.append(revisions) } })
        }
    }

    @Test func theNextBatchCommitsWhileOneIsPublishedAndBothArePublishedInOrderAndAnsweredBeforeTheCacheWrite() async throws {
        let harness = ServiceHarness()
        let log = GatedChangeLog(harness.dataset)
        let applier = ChangeSetApplier(store: harness.dataset, schema: harness.schema, limits: ServerSettings.Limits())
        let waiters = CommitWaiters(timers: MultiThreadedEventLoopGroup.singleton)
        let committer = Committer(applier: applier, changeLog: log, batchSize: 1, batchWait: .zero, waiters: waiters)
        let first = harness.device(2, role: "admin"), second = harness.device(3, role: "admin")
        func league(_ name: String) -> ChangeSet {
            changeSet(seq: 1, ("leagues", EntityChanges(create: [-1], attributes: [-1: ["name": .string(name)]])))
        }
        let answered = Answered()
        async let a: [ApplyOutcome] = {
            defer { answered.names.withLock { $0.append("a") } }
            return try await committer.apply([league("A")], device: first)
        }()
        // Until the first batch committed and its request, which led it, was answered: its cache
        // write still waits at the gate.
        try await until { harness.head == 1 && answered.names.withLock { $0 } == ["a"] }
        async let b: [ApplyOutcome] = {
            defer { answered.names.withLock { $0.append("b") } }
            return try await committer.apply([league("B")], device: second)
        }()
        // Whatever is expected below, the gate opens before the requests are awaited at the end.
        defer { log.open() }
        try await until { harness.head == 2 }
        // Time for a wrong publication or answer to happen, if one were going to.
        try await Task.sleep(for: .milliseconds(100))
        #expect(log.held.withLock { $0 } == [[1]], "the second batch was published before the first's cache write ended")
        #expect(log.published.withLock { $0 }.isEmpty)
        #expect(answered.names.withLock { $0 } == ["a"], "the second request was answered before this instance held its entries")
        #expect(waiters.head == 0, "the waiters were woken before the cache had the batch")
        log.open()
        let (outcomesA, outcomesB) = try await (a, b)
        #expect(outcomesA.map(\.revision) == [1] && outcomesB.map(\.revision) == [2])
        #expect(log.held.withLock { $0 } == [[1], [2]])
        // The second batch's cache write ends on an event loop, maybe after its request was answered.
        try await until { log.published.withLock { $0 } == [[1], [2]] && waiters.head == 2 }
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
