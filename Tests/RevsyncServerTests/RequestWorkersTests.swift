import RevsyncHarness
import ServiceLifecycle
import Synchronization
import Testing
@testable import RevsyncServer

/// `RequestWorkers`: requests run on long-lived workers, or on their caller when every
/// worker is busy or the workers have stopped; none is ever left waiting.
@Suite(.timeLimit(.minutes(1))) struct RequestWorkersTests {
    /// Bound on the caller's task only: a worker, not a child of the caller, does not see it.
    @TaskLocal static var caller: String?

    /// Where a request ran: "caller" on the calling task, nil on a worker.
    static func whereItRan(_ workers: RequestWorkers) async throws -> String? {
        try await $caller.withValue("caller") { try await workers.run { Self.caller } }
    }

    @Test func requestsRunOnAWorkerWhichIsKeptForTheNext() async throws {
        let workers = RequestWorkers(size: 4)
        try await withRunning(workers) {
            for _ in 0..<3 {
                #expect(try await Self.whereItRan(workers) == nil)
                // The worker goes back to waiting just after it answers.
                try await eventually { workers.counts.idle == 1 }
            }
            #expect(workers.counts == (workers: 1, idle: 1))
        }
    }

    /// `size` busy workers, each holding a request until `gate` opens; returns when both run.
    static func occupy(
        _ workers: RequestWorkers, _ count: Int, until gate: Gate, in group: inout ThrowingTaskGroup<String?, any Error>
    ) async throws {
        let started = Started()
        for _ in 0..<count {
            group.addTask {
                try await Self.$caller.withValue("caller") {
                    try await workers.run {
                        started.add()
                        await gate.wait()
                        return Self.caller
                    }
                }
            }
        }
        try await eventually { started.count == count }
    }

    @Test func whenEveryWorkerIsBusyARequestWaitsForTheFirstFree() async throws {
        let workers = RequestWorkers(size: 2, heldAfter: .seconds(60), queueLimit: .seconds(60))
        let gate = Gate()
        try await withRunning(workers) {
            try await withThrowingTaskGroup(of: String?.self) { group in
                try await Self.occupy(workers, 2, until: gate, in: &group)
                let waiting = Task { try await Self.whereItRan(workers) }
                try await eventually { workers.queued == 1 }
                #expect(workers.counts == (workers: 2, idle: 0))
                await gate.open()
                let ran = try await waiting.value
                #expect(ran == nil, "on a worker, once one was free")
                for try await ran in group { #expect(ran == nil) }
            }
        }
    }

    /// Workers held past `heldAfter` are replaced: the request waiting behind them runs on a
    /// new worker, which ends once nothing waits.
    @Test func workersHeldByTheirRequestsAreReplacedAndTheExtraOnesEnd() async throws {
        let workers = RequestWorkers(size: 2, maxWorkers: 4, heldAfter: .milliseconds(200), queueLimit: .seconds(60))
        let gate = Gate()
        try await withRunning(workers) {
            try await withThrowingTaskGroup(of: String?.self) { group in
                try await Self.occupy(workers, 2, until: gate, in: &group)
                let began = ContinuousClock.now
                let ran = try await Self.whereItRan(workers)
                #expect(ran == nil, "on a third worker")
                // Not before the two were held (200 ms from when they took their requests).
                #expect(ContinuousClock.now - began >= .milliseconds(100))
                // The extra worker ends: two remain, both still held.
                try await eventually { workers.counts == (workers: 2, idle: 0) }
                await gate.open()
                for try await ran in group { #expect(ran == nil) }
                try await eventually { workers.counts == (workers: 2, idle: 2) }
            }
        }
    }

    /// No more than `maxWorkers`: past it a request waits up to the queue limit, then its
    /// caller runs it.
    @Test func pastTheMostWorkersARequestRunsOnItsCallerAfterTheQueueLimit() async throws {
        let workers = RequestWorkers(size: 1, maxWorkers: 1, heldAfter: .milliseconds(50), queueLimit: .milliseconds(300))
        let gate = Gate()
        try await withRunning(workers) {
            // The worker started and waiting first: under load its start alone can outlast the
            // 300 ms, and the request meant to hold it would then run on its caller.
            _ = try await Self.whereItRan(workers)
            try await eventually { workers.counts == (workers: 1, idle: 1) }
            try await withThrowingTaskGroup(of: String?.self) { group in
                try await Self.occupy(workers, 1, until: gate, in: &group)
                let began = ContinuousClock.now
                let ran = try await Self.whereItRan(workers)
                #expect(ran == "caller")
                #expect(ContinuousClock.now - began >= .milliseconds(300))
                #expect(workers.counts == (workers: 1, idle: 0))
                await gate.open()
                for try await ran in group { #expect(ran == nil) }
            }
        }
    }

    /// A worker that finishes request after request is not held: those queued behind it wait
    /// for it (here up to the queue limit, past which their callers run them). The queue limit
    /// leaves 2.4 s past the held limit for the worker to finish one more: with 1 s, a stall of
    /// the whole suite's first minute once fell on all 400 ms of it.
    @Test func whileAWorkerFinishesRequestsOthersWaitForIt() async throws {
        let workers = RequestWorkers(size: 1, heldAfter: .milliseconds(500), queueLimit: .seconds(3))
        try await withRunning(workers) {
            let ran = try await withThrowingTaskGroup(of: (waited: Duration, onWorker: Bool).self) { group in
                for _ in 0..<200 {
                    group.addTask {
                        let queued = ContinuousClock.now
                        return try await Self.$caller.withValue("caller") {
                            try await workers.run {
                                let waited = ContinuousClock.now - queued
                                try? await Task.sleep(for: .milliseconds(20))
                                return (waited, Self.caller == nil)
                            }
                        }
                    }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(ran.count == 200)
            #expect(ran.contains { $0.onWorker && $0.waited >= .milliseconds(600) }, "waited past the held limit behind a worker that kept finishing")
            #expect(ran.contains { !$0.onWorker }, "200 × 20 ms is more than the queue limit: the last ran on their callers")
        }
    }

    @Test func aRequestsErrorReachesItsCaller() async throws {
        struct Refused: Error {}
        let workers = RequestWorkers(size: 1)
        try await withRunning(workers) {
            await #expect(throws: Refused.self) { try await workers.run { () async throws -> Int in throw Refused() } }
            // The worker survives it.
            let ran = try await Self.whereItRan(workers)
            #expect(ran == nil)
        }
    }

    /// Requests handed over before the service runs (the HTTP server may start first) wait for it.
    @Test func aRequestHandedOverBeforeTheServiceRunsRunsOnceItDoes() async throws {
        let workers = RequestWorkers(size: 1, heldAfter: .seconds(60), queueLimit: .seconds(60))
        let early = Task { try await Self.whereItRan(workers) }
        try await eventually { workers.counts.workers == 1 }
        try await withRunning(workers) {
            let ran = try await early.value
            #expect(ran == nil)
        }
    }

    /// A worker being started when the workers stop never takes its job: the caller runs it.
    @Test func aRequestNoWorkerTookWhenTheWorkersStopRunsOnItsCaller() async throws {
        let workers = RequestWorkers(size: 1, heldAfter: .seconds(60), queueLimit: .seconds(60))
        let early = Task { try await Self.whereItRan(workers) }
        try await eventually { workers.counts.workers == 1 }
        workers.stop()
        #expect(try await early.value == "caller")
    }

    /// On shutdown a request under way ends with its answer; the one waiting for a worker and
    /// later ones run on their callers.
    @Test func afterShutdownRequestsRunOnTheirCallersAndTheOneUnderWayEnds() async throws {
        let workers = RequestWorkers(size: 1, heldAfter: .seconds(60), queueLimit: .seconds(60))
        let gate = Gate()
        let started = Started()
        var configuration = ServiceGroupConfiguration(services: [.init(service: workers)], logger: .init(label: "test"))
        configuration.maximumGracefulShutdownDuration = .seconds(30)
        let group = ServiceGroup(configuration: configuration)
        let running = Task { try await group.run() }
        let underWay = Task {
            try await workers.run {
                started.add()
                await gate.wait()
                return Self.caller
            }
        }
        try await eventually { started.count == 1 }
        let waiting = Task { try await Self.whereItRan(workers) }
        try await eventually { workers.queued == 1 }
        await group.triggerGracefulShutdown()
        try await eventually { workers.stopped }
        #expect(try await waiting.value == "caller")
        #expect(try await Self.whereItRan(workers) == "caller")
        await gate.open()
        #expect(try await underWay.value == nil)
        try await running.value
        #expect(workers.counts.workers == 0)
    }
}

/// Requests that have started (they run on other tasks).
private final class Started: Sendable {
    private let value = Atomic<Int>(0)
    var count: Int { value.load(ordering: .sequentiallyConsistent) }
    func add() { value.add(1, ordering: .sequentiallyConsistent) }
}
