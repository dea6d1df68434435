import Foundation
import Logging
import NIOCore
import RevsyncRedis
import ServiceLifecycle
import Synchronization

/// Wakes this instance's waiters for commits made on any instance, and follows the device
/// changes announced on Redis for `DeviceChangeWatcher`.
///
/// - This instance's own commits wake its waiters directly (`SyncService`).
/// - Every instance publishes its new head on a Redis channel of the dataset
///   (`RedisChangeLog.didCommit`); one subscription per instance hears the others', and on
///   the same connection the channel of device changes.
/// - While any request waits, PostgreSQL's head is read every `recheckInterval`: a message
///   lost (Redis down, restarted or flushed, the subscription reconnecting, a publish that
///   failed) delays a waiter by at most that long, and with Redis off it is the only way
///   another instance's commit arrives. One query per instance and interval, however many
///   wait, and none when the cache's reconciler read the head within the interval
///   (`Status.heardAuthoritativeHead`).
///
/// On graceful shutdown every waiter is answered at once, and later requests do not wait.
struct CommitFeed: Service {
    /// Whether the Redis subscription is up (tests wait for it before relying on it).
    final class Status: Sendable {
        let subscribed = Atomic<Bool>(false)
        package var isSubscribed: Bool { subscribed.load(ordering: .relaxed) }
        /// When PostgreSQL's head was last read and given to the waiters (uptime nanoseconds).
        private let lastHeadRead = Atomic<UInt64>(0)

        /// PostgreSQL's head was read and the waiters advanced to it (the cache's reconciler).
        func heardAuthoritativeHead() { lastHeadRead.store(NIODeadline.now().uptimeNanoseconds, ordering: .relaxed) }

        /// Whether the waiters were given PostgreSQL's head within `interval`.
        func headReadRecently(within interval: Duration) -> Bool {
            let last = lastHeadRead.load(ordering: .relaxed)
            return last > 0 && NIODeadline.now().uptimeNanoseconds - last < UInt64(interval.nanoseconds)
        }
    }

    let waiters: CommitWaiters
    let status: Status
    let changeLog: any ChangeLog
    let cache: RedisChangeLog?
    let deviceEvents: DeviceChangeWatcher.Events
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
        let waiters = self.waiters, status = self.status, devices = self.deviceEvents.continuation, metrics = cache.metrics
        metrics.redisSubscribed(since: nil)
        await RedisSubscription(configuration: cache.redis.configuration, channels: [keys.commits, keys.deviceChanges], logger: logger).run(
            subscribed: {
                status.subscribed.store(true, ordering: .relaxed)
                metrics.redisSubscribed(since: Date())
                devices.yield(.subscribed)
            },
            lost: {
                status.subscribed.store(false, ordering: .relaxed)
                metrics.redisSubscribed(since: nil)
                devices.yield(.lost)
            },
            message: { channel, payload in
                if channel == keys.deviceChanges {
                    devices.yield(.changed(String(buffer: payload)))
                    return
                }
                guard channel == keys.commits, let head = Int64(String(buffer: payload)) else { return }
                // First the cache, so that the woken waiters' read does not stop at the head it read last.
                cache.heard(head: head)
                waiters.advance(to: head)
            })
    }

    private func recheck() async {
        while !Task.isCancelled {
            try? await Task.sleep(for: recheckInterval)
            guard !Task.isCancelled else { return }
            guard waiters.count > 0, !status.headReadRecently(within: recheckInterval) else { continue }
            do {
                waiters.advance(to: try await changeLog.authoritativeState().head)
            } catch {
                logger.debug("re-checking the head for waiting requests failed", metadata: ["error": "\(error)"])
            }
        }
    }
}
