import RevsyncRedis
import ServiceLifecycle

/// Keeps the cached head and horizon up with PostgreSQL's, so a head that lags
/// (a cache write lost between COMMIT and Redis, a flush, a restart) catches up
/// within `interval` even when nothing new commits. One query per interval, not per request.
struct CacheReconciler: Service {
    let cache: RedisChangeLog
    let interval: Duration

    func run() async throws {
        // Both ways out matter: graceful shutdown, and plain cancellation (a cancelled sleep returns at once).
        while !Task.isShuttingDownGracefully && !Task.isCancelled {
            try? await cancelWhenGracefulShutdown { try await Task.sleep(for: interval) }
            guard !Task.isShuttingDownGracefully, !Task.isCancelled else { break }
            await cache.reconcile()
        }
    }
}

/// Runs the Redis client's lifecycle inside the server's service group.
struct RedisService: Service {
    let client: RedisClient

    func run() async throws {
        try? await cancelWhenGracefulShutdown { try await client.run() }
        await client.shutdown()
    }
}
