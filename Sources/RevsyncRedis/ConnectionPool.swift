import Logging
import NIOCore
import Synchronization

/// The client's connections: at most `poolSize`, shared by every call.
///
/// A call takes the first idle connection from the next slot in turn on, so that it does not
/// queue behind a slow command (a write held by Redis, a large read) while another connection
/// has nothing to do. With none idle, it opens a connection in the first slot without one, so
/// that concurrent calls spread over up to `poolSize` connections; with every slot connected and
/// busy, it takes the one with the fewest replies awaited (a pipeline's each count) and
/// pipelines behind them. A slot whose connection has failed or closed (Redis restarted, a command timed
/// out) is connected anew by the next call that takes it: that is the whole reconnect story,
/// and it needs nothing from the caller. Calls arriving while a slot connects wait for that
/// one connect instead of starting their own.
final class ConnectionPool: Sendable {
    private enum Slot {
        case empty
        case connecting(EventLoopFuture<RedisConnection>)
        case ready(RedisConnection)
    }

    private struct State {
        var slots: [Slot]
        var next = 0
        var isShutDown = false
        /// The last connect failure, replayed to callers until the retry delay has passed.
        var connectFailure: (error: RedisError, until: ContinuousClock.Instant)?
        /// Whether the last connect attempt failed; only the change is logged, not every attempt.
        var isUnreachable = false

        /// The slot a call takes (see the type's comment); `take(_:)` moves the turn past it.
        func choice() -> Int {
            var leastBusy: (slot: Int, replies: Int)?
            var unconnected: Int?
            for offset in 0..<slots.count {
                let slot = (next + offset) % slots.count
                switch slots[slot] {
                case .ready(let connection) where connection.isUsable:
                    let replies = connection.awaitedReplies
                    if replies == 0 { return slot }
                    if replies < leastBusy?.replies ?? .max { leastBusy = (slot, replies) }
                case .ready, .empty:
                    if unconnected == nil { unconnected = slot }
                case .connecting:
                    break
                }
            }
            return unconnected ?? leastBusy?.slot ?? next
        }

        mutating func take(_ slot: Int) {
            next = (slot + 1) % slots.count
        }
    }

    /// What a call found in its slot.
    private enum Turn {
        case use(RedisConnection)
        case await(EventLoopFuture<RedisConnection>)
        case connect(slot: Int, EventLoopPromise<RedisConnection>)
    }

    private let state: Mutex<State>
    private let configuration: RedisConfiguration
    private let eventLoopGroup: any EventLoopGroup
    private let logger: Logger

    init(configuration: RedisConfiguration, eventLoopGroup: any EventLoopGroup, logger: Logger) {
        self.state = Mutex(State(slots: Array(repeating: .empty, count: configuration.poolSize)))
        self.configuration = configuration
        self.eventLoopGroup = eventLoopGroup
        self.logger = logger
    }

    var isShutDown: Bool { state.withLock { $0.isShutDown } }

    /// The chosen slot's connection if it is ready, without waiting: the usual case, which needs
    /// no async call. Nil when that slot has none yet (or a dead one); `connection()` then
    /// takes that turn and opens it.
    func readyConnection() -> RedisConnection? {
        state.withLock { state in
            guard !state.isShutDown else { return nil }
            let slot = state.choice()
            guard case .ready(let connection) = state.slots[slot], connection.isUsable else { return nil }
            state.take(slot)
            return connection
        }
    }

    /// A working connection, opened here if its slot has none.
    /// - Throws: ``RedisError/shutDown``, or ``RedisError/connectionFailed(endpoint:reason:)``
    ///   (replayed without a new attempt within the retry delay of the last failure).
    func connection() async throws(RedisError) -> RedisConnection {
        let now = ContinuousClock.now
        let turn = try state.withLock { state throws(RedisError) -> Turn in
            guard !state.isShutDown else { throw .shutDown }
            let slot = state.choice()
            state.take(slot)
            switch state.slots[slot] {
            case .ready(let connection) where connection.isUsable:
                return .use(connection)
            case .connecting(let future):
                return .await(future)
            case .ready, .empty:
                if let failure = state.connectFailure, now < failure.until { throw failure.error }
                let promise = eventLoopGroup.any().makePromise(of: RedisConnection.self)
                state.slots[slot] = .connecting(promise.futureResult)
                return .connect(slot: slot, promise)
            }
        }
        switch turn {
        case .use(let connection):
            return connection
        case .await(let future):
            return try await Self.value(of: future)
        case .connect(let slot, let promise):
            do {
                let connection = try await RedisConnection.connect(configuration: configuration, eventLoopGroup: eventLoopGroup)
                try connected(connection, slot: slot)
                promise.succeed(connection)
                return connection
            } catch {
                failedToConnect(error, slot: slot)
                promise.fail(error)
                throw error
            }
        }
    }

    /// Closes every connection; calls waiting on them fail with ``RedisError/shutDown``,
    /// and so does every call made afterwards. Returns once the connections have closed.
    func shutdown() async {
        let slots = state.withLock { state in
            state.isShutDown = true
            defer { state.slots = state.slots.map { _ in .empty } }
            return state.slots
        }
        for slot in slots {
            switch slot {
            case .ready(let connection):
                connection.close()
                await connection.closed()
            case .connecting(let future):
                // `connected` sees the flag and closes it.
                if let connection = try? await Self.value(of: future) { await connection.closed() }
            case .empty:
                break
            }
        }
    }

    private func connected(_ connection: RedisConnection, slot: Int) throws(RedisError) {
        let (recovered, isShutDown) = state.withLock { state in
            defer { state.isUnreachable = false }
            state.connectFailure = nil
            if !state.isShutDown { state.slots[slot] = .ready(connection) }
            return (state.isUnreachable, state.isShutDown)
        }
        if isShutDown {
            connection.close()
            throw .shutDown
        }
        if recovered {
            logger.notice("Redis is reachable again", metadata: ["redis.endpoint": "\(configuration.endpoint)"])
        } else {
            logger.debug("opened a Redis connection", metadata: ["redis.endpoint": "\(configuration.endpoint)"])
        }
    }

    private func failedToConnect(_ error: RedisError, slot: Int) {
        let wasReachable = state.withLock { state in
            defer { state.isUnreachable = true }
            if !state.isShutDown { state.slots[slot] = .empty }
            if configuration.connectRetryDelay > .zero, error != .shutDown {
                state.connectFailure = (error, ContinuousClock.now + configuration.connectRetryDelay)
            }
            return !state.isUnreachable
        }
        if wasReachable, error != .shutDown {
            logger.warning(
                "cannot connect to Redis",
                metadata: ["redis.endpoint": "\(configuration.endpoint)", "redis.error": "\(error)"])
        }
    }

    private static func value(of future: EventLoopFuture<RedisConnection>) async throws(RedisError) -> RedisConnection {
        do {
            return try await future.get()
        } catch let error as RedisError {
            throw error
        } catch {
            throw .protocolError("connecting failed with \(error)")
        }
    }
}
