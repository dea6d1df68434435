import Logging
import Synchronization

/// The client's connections and the permits that bound how many calls use them at once.
///
/// A call first awaits a permit (without blocking a thread), then, inside its
/// thread-pool work item, checks out a connection — an idle one that still
/// works, or a new one — and checks it back in when done. Permits equal the pool
/// size, so there are never more connections than that. A broken connection is
/// dropped at check-in (its `deinit` frees it) and the next call connects anew:
/// that is the whole reconnect story, and it needs nothing from the caller.
final class ConnectionPool: Sendable {
    private struct Waiter {
        var id: Int
        var continuation: CheckedContinuation<Void, any Error>
    }

    private struct State {
        var freePermits: Int
        var waiters: [Waiter] = []
        var nextWaiterID = 0
        var idle: [RedisConnection] = []
        var isShutDown = false
        /// The last connect failure, replayed to callers until the retry delay has passed.
        var connectFailure: (error: RedisError, until: ContinuousClock.Instant)?
        /// Whether the last connect attempt failed; only the change is logged, not every attempt.
        var isUnreachable = false
    }

    private let state: Mutex<State>
    private let configuration: RedisConfiguration
    private let logger: Logger

    init(configuration: RedisConfiguration, logger: Logger) {
        self.state = Mutex(State(freePermits: configuration.poolSize))
        self.configuration = configuration
        self.logger = logger
    }

    var isShutDown: Bool { state.withLock { $0.isShutDown } }

    // MARK: Permits (async, never block a thread)

    /// Waits for one of the `poolSize` permits. Throws `RedisError.shutDown` or `CancellationError`.
    func acquirePermit() async throws {
        let id: Int? = try state.withLock { state throws(RedisError) -> Int? in
            guard !state.isShutDown else { throw .shutDown }
            if state.freePermits > 0 {
                state.freePermits -= 1
                return nil
            }
            state.nextWaiterID += 1
            return state.nextWaiterID
        }
        guard let id else { return }

        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let immediate: (any Error)?? = state.withLock { state in
                    if state.isShutDown { return .some(RedisError.shutDown) }
                    // A permit may have come back since the fast path looked.
                    if state.freePermits > 0 {
                        state.freePermits -= 1
                        return .some(nil)
                    }
                    // Checked under the lock: the cancellation handler takes the same lock, so
                    // either it already ran (and the flag is set) or it will find this waiter.
                    if Task.isCancelled { return .some(CancellationError()) }
                    state.waiters.append(Waiter(id: id, continuation: continuation))
                    return .none
                }
                switch immediate {
                case .none: break
                case .some(.none): continuation.resume()
                case .some(.some(let error)): continuation.resume(throwing: error)
                }
            }
        } onCancel: {
            let waiter = state.withLock { state -> Waiter? in
                guard let index = state.waiters.firstIndex(where: { $0.id == id }) else { return nil }
                return state.waiters.remove(at: index)
            }
            waiter?.continuation.resume(throwing: CancellationError())
        }
    }

    /// Returns a permit, handing it straight to the longest waiter if there is one.
    func releasePermit() {
        let next = state.withLock { state -> Waiter? in
            if state.waiters.isEmpty {
                state.freePermits += 1
                return nil
            }
            return state.waiters.removeFirst()
        }
        next?.continuation.resume()
    }

    // MARK: Connections (blocking; only inside a thread-pool work item holding a permit)

    /// An idle connection that still works, or a new one. Blocks while connecting.
    func checkOut() throws(RedisError) -> RedisConnection {
        while let connection = state.withLock({ $0.idle.popLast() }) {
            if connection.isReusable() { return connection }
            logger.debug("discarding a dead idle Redis connection", metadata: ["redis.endpoint": "\(configuration.endpoint)"])
        }

        let now = ContinuousClock.now
        let recentFailure = state.withLock { state -> RedisError? in
            guard let failure = state.connectFailure, now < failure.until else { return nil }
            return failure.error
        }
        if let recentFailure { throw recentFailure }

        do {
            let connection = try RedisConnection(configuration: configuration)
            let recovered = state.withLock { state in
                defer { state.isUnreachable = false }
                state.connectFailure = nil
                return state.isUnreachable
            }
            if recovered {
                logger.notice("Redis is reachable again", metadata: ["redis.endpoint": "\(configuration.endpoint)"])
            } else {
                logger.debug("opened a Redis connection", metadata: ["redis.endpoint": "\(configuration.endpoint)"])
            }
            return connection
        } catch {
            let wasReachable = state.withLock { state in
                defer { state.isUnreachable = true }
                if configuration.connectRetryDelay > .zero {
                    state.connectFailure = (error, ContinuousClock.now + configuration.connectRetryDelay)
                }
                return !state.isUnreachable
            }
            if wasReachable {
                logger.warning(
                    "cannot connect to Redis",
                    metadata: ["redis.endpoint": "\(configuration.endpoint)", "redis.error": "\(error)"])
            }
            throw error
        }
    }

    /// Takes a connection back, or drops it if it broke or the pool has shut down.
    func checkIn(_ connection: RedisConnection) {
        guard !connection.isBroken else {
            logger.debug("discarding a broken Redis connection", metadata: ["redis.endpoint": "\(configuration.endpoint)"])
            return
        }
        // Dropped outside the lock if the pool is gone: deinit closes the socket.
        _ = state.withLock { state -> RedisConnection? in
            guard !state.isShutDown else { return connection }
            state.idle.append(connection)
            return nil
        }
    }

    // MARK: Shutdown

    /// Refuses new calls, fails the waiting ones and closes the idle connections.
    /// Connections in use are closed when their calls check them in.
    func shutdown() {
        let (waiters, idle) = state.withLock { state in
            state.isShutDown = true
            defer {
                state.waiters = []
                state.idle = []
            }
            return (state.waiters, state.idle)
        }
        for waiter in waiters {
            waiter.continuation.resume(throwing: RedisError.shutDown)
        }
        _ = idle  // released here, outside the lock; each deinit calls redisFree
    }
}
