import Logging
import NIOCore
import RevsyncRedis
import ServiceLifecycle
import Synchronization

/// Wakes this instance's waiters for commits made on any instance.
///
/// - This instance's own commits wake its waiters directly (`SyncService`).
/// - Every instance publishes its new head on a Redis channel of the dataset
///   (`RedisChangeLog.didCommit`); one subscription per instance hears the others'.
/// - While any request waits, PostgreSQL's head is read every `recheckInterval`: a message
///   lost (Redis down, restarted or flushed, the subscription reconnecting, a publish that
///   failed) delays a waiter by at most that long, and with Redis off it is the only way
///   another instance's commit arrives. One query per instance and interval, however many wait.
///
/// On graceful shutdown every waiter is answered at once, and later requests do not wait.
struct CommitFeed: Service {
    /// Whether the Redis subscription is up (tests wait for it before relying on it).
    final class Status: Sendable {
        let subscribed = Atomic<Bool>(false)
        package var isSubscribed: Bool { subscribed.load(ordering: .relaxed) }
    }

    let waiters: CommitWaiters
    let status: Status
    let changeLog: any ChangeLog
    let cache: RedisChangeLog?
    let recheckInterval: Duration
    let logger: Logger

    func run() async throws {
        await withDiscardingTaskGroup { group in
            if let cache { group.addTask { await follow(cache) } }
            group.addTask { await recheck() }
            try? await gracefulShutdown()
            waiters.close()
            group.cancelAll()
        }
    }

    /// The Redis subscription, once the cache knows its keys (after migrations).
    private func follow(_ cache: RedisChangeLog) async {
        var keys = cache.keys.withLock { $0 }
        while keys == nil, !Task.isCancelled {
            try? await Task.sleep(for: .milliseconds(100))
            keys = cache.keys.withLock { $0 }
        }
        guard let keys else { return }
        let waiters = self.waiters, status = self.status
        await RedisSubscription(configuration: cache.redis.configuration, channel: keys.commits, logger: logger).run(
            subscribed: { status.subscribed.store(true, ordering: .relaxed) },
            lost: { status.subscribed.store(false, ordering: .relaxed) },
            message: { payload in
                guard let head = Int64(String(buffer: payload)) else { return }
                // First the cache, so that the woken waiters' read does not stop at the head it read last.
                cache.heard(head: head)
                waiters.advance(to: head)
            })
    }

    private func recheck() async {
        while !Task.isCancelled {
            try? await Task.sleep(for: recheckInterval)
            guard !Task.isCancelled else { return }
            guard waiters.count > 0 else { continue }
            do {
                waiters.advance(to: try await changeLog.authoritativeState().head)
            } catch {
                logger.debug("re-checking the head for waiting requests failed", metadata: ["error": "\(error)"])
            }
        }
    }
}
