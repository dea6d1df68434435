import Logging
import NIOCore
import NIOPosix
import Synchronization

/// A small pooled Redis client on hiredis.
///
/// hiredis blocks, so every call runs on a `NIOThreadPool`, never on an event
/// loop or the cooperative pool; callers just `await`. At most
/// ``RedisConfiguration/poolSize`` calls run at once, each on its own
/// connection; further calls wait their turn without holding a thread.
///
/// Failures are ``RedisError``s (or `CancellationError` for a call cancelled
/// while it waited for a connection). A connection that hits an I/O error or
/// a timeout is thrown away and the next call opens a new one, so after Redis
/// restarts the client recovers by itself. While Redis is down, calls fail
/// within about ``RedisConfiguration/connectTimeout``, or at once during the
/// ``RedisConfiguration/connectRetryDelay`` after a failed connect.
///
/// Lifecycle: the client connects lazily, on first use. Call ``shutdown()``
/// once you are done with it (or use ``withClient(configuration:threadPool:logger:isolation:_:)``,
/// or ``run()`` under a service group): it closes the connections and stops the
/// thread pool the client created. Calls made afterwards throw ``RedisError/shutDown``.
public final class RedisClient: Sendable {
    /// The configuration the client was created with.
    public let configuration: RedisConfiguration

    let pool: ConnectionPool
    let scripts = ScriptCache()
    private let threadPool: NIOThreadPool
    private let ownsThreadPool: Bool
    private let logger: Logger
    private let hasShutDown = Mutex(false)
    private let shutdownSignal: AsyncStream<Never>
    private let shutdownSignalContinuation: AsyncStream<Never>.Continuation

    /// Creates a client. Nothing connects until the first call.
    ///
    /// - Parameters:
    ///   - configuration: where Redis is, timeouts and pool size; checked here.
    ///   - threadPool: a started pool to run hiredis calls on, which the caller keeps
    ///     running until after ``shutdown()`` and stops itself. If `nil`, the client
    ///     starts its own with one thread per connection and stops it in ``shutdown()``.
    ///   - logger: connection events, at debug except the change to and from "unreachable".
    /// - Throws: ``RedisError/invalidConfiguration(_:)``.
    public init(
        configuration: RedisConfiguration,
        threadPool: NIOThreadPool? = nil,
        logger: Logger = Logger(label: "revsync.redis")
    ) throws(RedisError) {
        try configuration.validate()
        self.configuration = configuration
        self.logger = logger
        self.pool = ConnectionPool(configuration: configuration, logger: logger)
        if let threadPool {
            self.threadPool = threadPool
            self.ownsThreadPool = false
        } else {
            let threadPool = NIOThreadPool(numberOfThreads: configuration.poolSize)
            threadPool.start()
            self.threadPool = threadPool
            self.ownsThreadPool = true
        }
        (shutdownSignal, shutdownSignalContinuation) = AsyncStream.makeStream()
    }

    /// Runs `body` with a new client and shuts the client down afterwards, also when `body` throws.
    @discardableResult
    public static func withClient<Result>(
        configuration: RedisConfiguration,
        threadPool: NIOThreadPool? = nil,
        logger: Logger = Logger(label: "revsync.redis"),
        isolation: isolated (any Actor)? = #isolation,
        _ body: (RedisClient) async throws -> Result
    ) async throws -> Result {
        let client = try RedisClient(configuration: configuration, threadPool: threadPool, logger: logger)
        do {
            let result = try await body(client)
            await client.shutdown()
            return result
        } catch {
            await client.shutdown()
            throw error
        }
    }

    /// Closes the connections and, if the client created it, stops its thread pool.
    ///
    /// Calls waiting for a connection fail with ``RedisError/shutDown``. With the client's
    /// own thread pool, calls already running finish before this returns; with a pool
    /// passed in, they finish on their own and their connections are closed then.
    /// Only the first call does the work; later calls return at once.
    public func shutdown() async {
        let isFirst = hasShutDown.withLock { done in
            defer { done = true }
            return !done
        }
        guard isFirst else { return }
        pool.shutdown()
        if ownsThreadPool {
            do {
                // Waits for work items already running, so their connections are freed by then.
                try await threadPool.shutdownGracefully()
            } catch {
                logger.error("stopping the Redis thread pool failed", metadata: ["redis.error": "\(error)"])
            }
        }
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

    /// Runs `body` on the thread pool with a connection of its own.
    ///
    /// The permit is awaited here, off the thread pool, so waiting never occupies a
    /// thread. The connection is checked out and back in inside the work item: if the
    /// work item never runs (cancelled or pool stopped), no connection was taken.
    func withConnection<Value: Sendable>(
        _ body: @escaping @Sendable (RedisConnection) throws(RedisError) -> Value
    ) async throws -> Value {
        try await pool.acquirePermit()
        defer { pool.releasePermit() }
        do {
            return try await threadPool.runIfActive { [pool] () throws(RedisError) -> Value in
                BrokenPipeSignal.blockOnCurrentThread()
                let connection = try pool.checkOut()
                defer { pool.checkIn(connection) }
                return try body(connection)
            }
        } catch let error as RedisError {
            throw error
        } catch {
            // Not run at all: the thread pool stopped or the task was cancelled before its turn.
            if pool.isShutDown || error is NIOThreadPoolError.ThreadPoolInactive { throw RedisError.shutDown }
            throw error
        }
    }
}
