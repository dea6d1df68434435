import RevsyncRedis
import ServiceLifecycle

/// Keeps the cached head and horizon up with PostgreSQL's, so a head that lags
/// (a cache write lost between COMMIT and Redis, a flush, a restart) catches up
/// within `interval` even when nothing new commits. One query per interval, not per request.
/// The head it reads also advances the waiting requests, so that `CommitFeed` need not read
/// it again for them, and the history id it reads with it serves `HistoryWatch`'s check when
/// one is due, so that the watch need not read either; the count of device changes goes to
/// `DeviceChangeWatcher`.
struct CacheReconciler: Service {
    let cache: RedisChangeLog
    let interval: Duration
    let waiters: CommitWaiters
    let feed: CommitFeed.Status
    let history: HistoryWatch
    /// Where the count of device changes read with the head goes (`DeviceChangeWatcher`).
    let deviceEvents: DeviceChangeWatcher.Events

    func run() async throws {
        // PostgreSQL's count of device changes as last handed to the watcher.
        var deviceChanges: Int64? = nil
        // Both ways out matter: graceful shutdown, and plain cancellation (a cancelled sleep returns at once).
        while !Task.isShuttingDownGracefully && !Task.isCancelled {
            try? await cancelWhenGracefulShutdown { try await Task.sleep(for: interval) }
            guard !Task.isShuttingDownGracefully, !Task.isCancelled else { break }
            // Before the read, as the watch's own check marks before its query.
            let before = history.history.mark
            guard let read = await cache.reconcile() else { continue }
            waiters.advance(to: read.state.head)
            // Handed on when it moved (or first read): a value a second must not crowd the
            // watcher's bounded queue of events from its subscription.
            if read.deviceChanges != deviceChanges {
                deviceChanges = read.deviceChanges
                deviceEvents.continuation.yield(.stored(read.deviceChanges))
            }
            feed.heardAuthoritativeHead()
            guard history.isDue(period: interval) else { continue }
            do {
                try await history.check(before: before, read: read.historyRead)
            } catch {
                history.logger.debug("history check skipped", metadata: ["error": "\(error)"])
            }
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
