import Logging
import NIOCore
import NIOPosix
import Synchronization

/// A small pooled Redis client on SwiftNIO.
///
/// Commands are written and their replies read on event loops; callers just `await`, and no
/// thread ever blocks on Redis. The client keeps at most ``RedisConfiguration/poolSize``
/// connections, and concurrent calls share them: a call takes a connection with nothing
/// outstanding if there is one, else opens one while fewer than the pool size are open, else
/// is pipelined on the one with the fewest replies awaited. A command that blocks on the
/// server (`BLPOP`, or a write while Redis is paused) holds up the calls behind it on its
/// connection, but no call goes behind it while another connection is idle.
///
/// Failures are ``RedisError``s. A connection that fails or times out is closed, and the next
/// call to need it opens a new one, so after Redis restarts the client recovers by itself.
/// While Redis is down, calls fail within about ``RedisConfiguration/connectTimeout``, or at
/// once during the ``RedisConfiguration/connectRetryDelay`` after a failed connect.
///
/// Lifecycle: the client connects lazily, on first use. Call ``shutdown()`` once you are done
/// with it (or use ``withClient(configuration:eventLoopGroup:logger:isolation:_:)``, or
/// ``run()`` under a service group): it closes the connections, failing the calls still
/// waiting on them. Calls made afterwards throw ``RedisError/shutDown``.
public final class RedisClient: Sendable {
    /// The configuration the client was created with.
    public let configuration: RedisConfiguration

    let pool: ConnectionPool
    let scripts = ScriptCache()
    private let logger: Logger
    private let hasShutDown = Mutex(false)
    private let shutdownSignal: AsyncStream<Never>
    private let shutdownSignalContinuation: AsyncStream<Never>.Continuation

    /// Creates a client. Nothing connects until the first call.
    ///
    /// - Parameters:
    ///   - configuration: where Redis is, timeouts and pool size; checked here.
    ///   - eventLoopGroup: where the connections live; the process's shared one unless given.
    ///   - logger: connection events, at debug except the change to and from "unreachable".
    /// - Throws: ``RedisError/invalidConfiguration(_:)``.
    public init(
        configuration: RedisConfiguration,
        eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        logger: Logger = Logger(label: "revsync.redis")
    ) throws(RedisError) {
        try configuration.validate()
        self.configuration = configuration
        self.logger = logger
        self.pool = ConnectionPool(configuration: configuration, eventLoopGroup: eventLoopGroup, logger: logger)
        (shutdownSignal, shutdownSignalContinuation) = AsyncStream.makeStream()
    }

    /// Runs `body` with a new client and shuts the client down afterwards, also when `body` throws.
    @discardableResult
    public static func withClient<Result>(
        configuration: RedisConfiguration,
        eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        logger: Logger = Logger(label: "revsync.redis"),
        isolation: isolated (any Actor)? = #isolation,
        _ body: (RedisClient) async throws -> Result
    ) async throws -> Result {
        let client = try RedisClient(configuration: configuration, eventLoopGroup: eventLoopGroup, logger: logger)
        do {
            let result = try await body(client)
            await client.shutdown()
            return result
        } catch {
            await client.shutdown()
            throw error
        }
    }

    /// Closes the connections. Calls still waiting on them fail with ``RedisError/shutDown``.
    /// Only the first call does the work; later calls return at once.
    public func shutdown() async {
        let isFirst = hasShutDown.withLock { done in
            defer { done = true }
            return !done
        }
        guard isFirst else { return }
        await pool.shutdown()
        shutdownSignalContinuation.finish()
        logger.debug("Redis client shut down", metadata: ["redis.endpoint": "\(configuration.endpoint)"])
    }

    /// Suspends until the calling task is cancelled or ``shutdown()`` is called, then shuts down.
    ///
    /// This is the shape of swift-service-lifecycle's `Service.run()`, so the server can
    /// add `extension RedisClient: @retroactive Service {}` and run it in its
    /// `ServiceGroup` (with `cancelWhenGracefulShutdown` so it stops with the others).
    public func run() async throws {
        // Iteration ends when the task is cancelled or the stream is finished by shutdown().
        for await _ in shutdownSignal {}
        await shutdown()
    }

    /// Runs `body` with a connection from the pool.
    func withConnection<Value: Sendable>(
        _ body: (RedisConnection) async throws(RedisError) -> Value
    ) async throws(RedisError) -> Value {
        try await body(pool.connection())
    }
}
