import ServiceLifecycle
import Synchronization

/// A few long-lived tasks that run `POST /sync` requests for the connections' tasks (a `Service`).
///
/// A connection's task keeps the high-water mark of its frames for as long as the connection
/// lives: Swift's task allocator keeps every slab the task opened. A request run on it
/// (Hummingbird's responder, the router, the middleware, the route, the exchange) leaves a
/// dozen slabs to the connection, and a waiting device's connection holds them all the while
/// it waits. Run here, the request's frames are kept once per worker, for every request it
/// runs; the connection's task waits for the request to end with one small frame.
///
/// When every worker is busy a request waits for the first free one: a burst (a fleet
/// reconnecting after a deploy) goes through them in turn, which is as fast as the cores allow
/// either way. A worker busy with one request for `heldAfter` (1 s) is held (by a client, say:
/// a slow body, an answer not read) and no longer counted: more workers start in its place,
/// up to `maxWorkers`, so that clients holding workers take no workers from the others, and
/// no more time than that second; the extra ones end once nothing waits. A request that waited `queueLimit` (10 s)
/// whatever happens runs on its connection's task, as it would without workers.
final class RequestWorkers: Service, Sendable {
    /// A request handed over: `run` on a worker, or `decline` to have the caller run it.
    private struct Job: Sendable {
        let run: @Sendable () async -> Void
        let decline: @Sendable () -> Void
    }

    private struct Queued {
        let job: Job
        let since: ContinuousClock.Instant
    }

    private struct State {
        /// Workers waiting for a job.
        var idle: [(id: Int, next: CheckedContinuation<Job?, Never>)] = []
        /// Jobs waiting for a worker, oldest first: FIFO as two stacks, pushed on `incoming`
        /// and popped from `outgoing`.
        var incoming: [Queued] = []
        var outgoing: [Queued] = []
        var workers = 0
        var stopped = false
        /// When each busy worker took its request, by worker.
        var busySince: [Int: ContinuousClock.Instant] = [:]
        var nextWorker = 0

        var isQueueEmpty: Bool { incoming.isEmpty && outgoing.isEmpty }
        var queueLength: Int { incoming.count + outgoing.count }

        mutating func take() -> Queued? {
            if outgoing.isEmpty {
                outgoing = incoming.reversed()
                incoming = []
            }
            return outgoing.popLast()
        }

        /// The oldest job waiting, left in the queue.
        var oldest: Queued? { outgoing.last ?? incoming.first }

        mutating func takeAll() -> [Queued] {
            defer {
                incoming = []
                outgoing = []
            }
            return outgoing.reversed() + incoming
        }
    }

    private enum Placement {
        case handed(CheckedContinuation<Job?, Never>)
        case queued(spawn: Bool, first: Bool)
        case inline
    }

    /// Workers kept.
    let size: Int
    /// Workers at most, held ones included.
    let maxWorkers: Int
    /// How long a worker may be busy with one request before it counts as held.
    let heldAfter: Duration
    /// The longest a request waits for a free worker.
    let queueLimit: Duration
    private let state = Mutex(State())
    /// One element per worker to start: `run` starts a task for each.
    private let spawns: AsyncStream<Void>
    private let spawn: AsyncStream<Void>.Continuation
    /// A job queued while none was: `run`'s watch looks at the queue's age until it is empty.
    private let queuedSignals: AsyncStream<Void>
    private let queuedSignal: AsyncStream<Void>.Continuation

    /// Counts where each request ran.
    private let metrics: ServerMetrics?

    init(
        size: Int, maxWorkers: Int? = nil, heldAfter: Duration = .seconds(1), queueLimit: Duration = .seconds(10),
        metrics: ServerMetrics? = nil
    ) {
        self.size = max(0, size)
        self.maxWorkers = max(self.size, maxWorkers ?? self.size * 16)
        self.metrics = metrics
        self.heldAfter = heldAfter
        self.queueLimit = queueLimit
        (spawns, spawn) = AsyncStream.makeStream(of: Void.self)
        (queuedSignals, queuedSignal) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
    }

    /// Workers started, and of those waiting for a job (tests).
    var counts: (workers: Int, idle: Int) { state.withLock { ($0.workers, $0.idle.count) } }

    /// Requests waiting for a worker (tests).
    var queued: Int { state.withLock { $0.queueLength } }

    /// Whether the workers have stopped taking requests (tests).
    var stopped: Bool { state.withLock { $0.stopped } }

    /// `work`'s result, run on a worker, or on the calling task when no worker was free within
    /// `queueLimit` or the workers have stopped. Not cancelled with the caller: the connection's
    /// loop, when cancelled, closes its channel's input, which ends what `work` reads and writes.
    func run<T: Sendable>(_ work: @escaping @Sendable () async throws -> T) async throws -> T {
        let ran = await withCheckedContinuation { (done: CheckedContinuation<Result<T, any Error>?, Never>) in
            let job = Job(
                run: {
                    do {
                        done.resume(returning: .success(try await work()))
                    } catch {
                        done.resume(returning: .failure(error))
                    }
                },
                decline: { done.resume(returning: nil) })
            switch place(job) {
            case .handed(let worker):
                worker.resume(returning: job)
            case .queued(let spawn, let first):
                if spawn { startWorker() }
                if first { queuedSignal.yield() }
            case .inline:
                job.decline()
            }
        }
        metrics?.recordRequestPlacement(onWorker: ran != nil)
        guard let ran else { return try await work() }
        return try ran.get()
    }

    private func place(_ job: Job) -> Placement {
        state.withLock { state in
            guard !state.stopped else { return .inline }
            if let worker = state.idle.popLast() {
                state.busySince[worker.id] = .now
                return .handed(worker.next)
            }
            let first = state.isQueueEmpty
            state.incoming.append(Queued(job: job, since: .now))
            guard state.workers < size else { return .queued(spawn: false, first: first) }
            state.workers += 1
            return .queued(spawn: true, first: first)
        }
    }

    func run() async throws {
        await withDiscardingTaskGroup { group in
            group.addTask { await self.watchQueue() }
            await withGracefulShutdownHandler {
                for await _ in spawns {
                    group.addTask { await self.work() }
                }
            } onGracefulShutdown: {
                self.stop()
            }
            // Also when cancelled rather than shut down, when the stream ends without `stop`.
            self.stop()
        }
    }

    /// No new work here: idle workers end, busy ones after their job, jobs not yet taken go
    /// back to their callers, and later requests run on their connections' tasks. The HTTP
    /// server stops before this service (services stop in reverse order), so nothing should
    /// be under way by then. (Internal for the tests; the service calls it when it stops.)
    func stop() {
        let (idle, queued) = state.withLock { state in
            state.stopped = true
            state.workers -= state.idle.count
            defer { state.idle = [] }
            return (state.idle, state.takeAll())
        }
        spawn.finish()
        queuedSignal.finish()
        for worker in idle { worker.next.resume(returning: nil) }
        for waiting in queued { waiting.job.decline() }
    }

    /// While jobs wait: starts workers in place of held ones, and hands back to their callers
    /// the jobs that waited `queueLimit`; sleeps while nothing waits.
    private func watchQueue() async {
        for await _ in queuedSignals {
            while true {
                let (expired, starting, waiting) = state.withLock { state -> ([Queued], Int, Bool) in
                    var expired: [Queued] = []
                    let now = ContinuousClock.now
                    while let oldest = state.oldest, now - oldest.since >= queueLimit, let taken = state.take() {
                        expired.append(taken)
                    }
                    let queued = state.queueLength
                    let held = state.busySince.values.count { now - $0 >= heldAfter }
                    // One more for each held worker not yet replaced (those past `size` are
                    // the replacements); `run` starts the first `size` itself.
                    let starting = max(0, min(held - max(0, state.workers - size), maxWorkers - state.workers, queued))
                    state.workers += starting
                    return (expired, starting, queued > 0)
                }
                for waiting in expired { waiting.job.decline() }
                for _ in 0..<starting { startWorker() }
                guard waiting else { break }
                // In steps of 10 ms: the oldest may be taken by a worker meanwhile, and once
                // nothing waits this ends (the service cannot stop while it sleeps).
                try? await Task.sleep(for: .milliseconds(10))
            }
        }
    }

    /// Asks `run` for one more worker, already counted; once the workers have stopped, none
    /// starts, and it is counted out again.
    private func startWorker() {
        guard case .terminated = spawn.yield() else { return }
        state.withLock { $0.workers -= 1 }
    }

    private func work() async {
        let id = state.withLock { state in
            defer { state.nextWorker += 1 }
            return state.nextWorker
        }
        while let job = await next(id) {
            await job.run()
            _ = state.withLock { $0.busySince.removeValue(forKey: id) }
        }
    }

    /// The next job for worker `id`; nil, having counted it out, when it is to end (stopped,
    /// or one of the extra workers with nothing waiting).
    private func next(_ id: Int) async -> Job? {
        await withCheckedContinuation { (next: CheckedContinuation<Job?, Never>) in
            enum Step { case job(Job), stopped, idle }
            let step = state.withLock { state -> Step in
                if let queued = state.take() {
                    state.busySince[id] = .now
                    return .job(queued.job)
                }
                guard !state.stopped, state.workers <= size else {
                    state.workers -= 1
                    return .stopped
                }
                state.idle.append((id, next))
                return .idle
            }
            switch step {
            case .job(let job): next.resume(returning: job)
            case .stopped: next.resume(returning: nil)
            case .idle: break
            }
        }
    }
}
