import Logging
import RevsyncRules
import ServiceLifecycle
import Synchronization

/// Keeps this instance's `DatasetHistory` up with the database's, and renews the database's
/// history id when it finds the database went back: a head read below the highest revision
/// this instance saw, or a batch of its own numbered at or below it (`DatasetHistory.committed`),
/// or a cache ahead of PostgreSQL (`RedisChangeLog`). One small query every
/// `interval`; a renewal made elsewhere (another instance, `revsync restored`) is learned by
/// the next one, and by any request that names an id this instance does not hold.
///
/// With the Redis cache on, the cache's reconciler reads the same row every
/// `REVSYNC_CACHE_RECONCILE_MS` (`HeadReading`), and its read serves a check that is due
/// (`check(before:read:)`): the watch then reads nothing itself. It reads again once no read
/// came for a quarter of an interval past its due time (Redis down, the reconciler stalled).
///
/// A class: every waiting request holds its `SyncService`, which holds this by one reference
/// instead of a copy of its fields (a waiter grew by about 100 bytes as a struct).
package final class HistoryWatch: Service, Sendable {
    package let history: DatasetHistory
    let store: PostgresHistory
    let interval: Duration
    let logger: Logger
    /// Called with the new id when it changed, before requests are checked against it: what the
    /// instance kept of the old line of revisions (cached entries, snapshot files) is dropped.
    let changed: @Sendable (String) async -> Void
    /// Whether the cache found itself ahead of PostgreSQL since the last call, as when the reads
    /// that found it began (`RedisChangeLog.takeRewindFound`).
    let cacheFoundRewind: @Sendable () -> ContinuousClock.Instant?
    /// Called with the database's head once a new id is held (answers carry it): the requests
    /// waiting for a commit are answered now (`CommitWaiters.rewind`).
    let adopted: @Sendable (_ head: Int64) -> Void
    /// When a check last read the database (any check: the watch's, a request's, the reconciler's).
    private let lastRead = Mutex<ContinuousClock.Instant?>(nil)

    init(
        history: DatasetHistory, store: PostgresHistory, interval: Duration, logger: Logger,
        changed: @escaping @Sendable (String) async -> Void, cacheFoundRewind: @escaping @Sendable () -> ContinuousClock.Instant?,
        adopted: @escaping @Sendable (_ head: Int64) -> Void = { _ in }
    ) {
        self.history = history
        self.store = store
        self.interval = interval
        self.logger = logger
        self.changed = changed
        self.cacheFoundRewind = cacheFoundRewind
        self.adopted = adopted
    }

    package func run() async throws {
        var schedule = HistoryCheckSchedule(interval: interval, startingAt: .now)
        // Both ways out matter: graceful shutdown, and plain cancellation (a cancelled sleep returns at once).
        while !Task.isShuttingDownGracefully && !Task.isCancelled {
            let pause = schedule.pause(lastRead: lastRead.withLock { $0 }, now: .now)
            if pause > .zero { try? await cancelWhenGracefulShutdown { try await Task.sleep(for: pause) } }
            guard !Task.isShuttingDownGracefully, !Task.isCancelled else { break }
            // Another check read meanwhile: its read moved the due time on.
            guard schedule.pause(lastRead: lastRead.withLock { $0 }, now: .now) <= .zero else { continue }
            do {
                try await check()
            } catch {
                logger.debug("history check skipped", metadata: ["error": "\(error)"])
            }
            // From the attempt's end: one that failed slowly (PostgreSQL unreachable, a lease
            // waiting out its deadline) is not retried back to back.
            schedule.attempted(at: .now, lastRead: lastRead.withLock { $0 })
        }
    }

    /// Whether a read made now on a timer of `period` (the cache's reconciler's) serves a check.
    func isDue(period: Duration) -> Bool {
        HistoryCheckSchedule.isDue(lastRead: lastRead.withLock { $0 }, now: .now, interval: interval, period: period)
    }

    /// Reads the database's head and history id; renews the id when the head is below what this
    /// instance saw, when one of its commits revealed a rewind, or when the database holds an
    /// older id than this instance does. Returns the id now held.
    @discardableResult
    package func check() async throws -> String {
        // Read before the query: every revision counted in it was committed before the query
        // started, so the query sees at least as much unless the database went back. And the id
        // held then is the one a renewal replaces: a check that runs beside another (a request's
        // beside the watch's) and finds the same rewind renews nothing once the other renewed
        // it, where the id held after its read would be the other's new one.
        let before = history.mark
        return try await check(before: before, read: try await store.read())
    }

    /// A check with a read another made after `before` (the cache's reconciler, `HeadReading`).
    @discardableResult
    func check(before: DatasetHistory.Mark, read: (head: Int64, id: String, since: HistorySince)) async throws -> String {
        let (head, id, since) = read
        lastRead.withLock { $0 = .now }
        if let held = before.id, held != id, HistoryRules.isOlderLine(databaseSince: since, heldSince: before.since) {
            // Renewed from the database's id: every instance that finds it renews the same one, once.
            // A cache found ahead meanwhile says the same: taken now, or the next check renews again.
            _ = cacheFoundRewind()
            return try await renew(from: id, head: head, why: [
                "found": "an older history id than this instance held: restored from a backup made before it was set",
                "restored": "\(id)", "held": "\(held)",
            ])
        }
        // What this instance saw was of the id it holds: only that one is renewed. When the
        // database holds another (newer) already, an instance or an operator renewed it first.
        let seen = before.id ?? id
        // Found by reads that began before this instance took the id it holds, the cache was of
        // the line that id replaced: the renewal (its own, or another instance's) answered it.
        // Every instance sharing the cache may find it ahead after a restore; each renewed again
        // once it held the first renewal's id, and devices loaded a snapshot per renewal.
        if let found = cacheFoundRewind(), history.tookIdAt.map({ found > $0 }) ?? true {
            return try await renew(from: seen, head: head, why: ["found": "the Redis cache ahead of PostgreSQL"])
        }
        if let rewind = history.rewind {
            return try await renew(from: seen, head: head, why: [
                "committed": "\(rewind.first)", "seenBefore": "\(rewind.highest)",
            ])
        }
        if HistoryRules.wentBack(head: head, highestSeen: before.highestSeen) {
            return try await renew(from: seen, head: head, why: ["head": "\(head)", "seenBefore": "\(before.highestSeen)"])
        }
        // Another check (a request's, beside the watch's) took an id since this one's mark: its
        // read may be later than this one's, which must not take the instance back. The next
        // check reads again.
        guard history.line == before.line else { return history.id ?? id }
        // Renewed elsewhere (another instance, `revsync restored`): nil before the first read.
        let renewedElsewhere = history.id.map { $0 != id } ?? false
        if renewedElsewhere {
            logger.notice("the database's history id changed: devices holding the old one load a new snapshot", metadata: ["history": "\(id)"])
            await changed(id)
        }
        history.adopt(id: id, since: since, head: head)
        if renewedElsewhere { adopted(head) }
        return id
    }

    /// Renews the database's id (unless it is no longer `id`: another instance renewed it
    /// first) and adopts the database's.
    @discardableResult
    package func renew(from id: String, head: Int64, why: Logger.Metadata) async throws -> String {
        let (current, since, renewed) = try await store.renew(from: id)
        var metadata = why
        metadata["history"] = "\(current)"
        if renewed {
            logger.warning(
                "the database went back (restored from a backup, or failed over with commits lost): its history id is renewed, every device loads a new snapshot",
                metadata: metadata)
        } else {
            logger.notice("the database went back; its history id was renewed already", metadata: metadata)
        }
        await changed(current)
        history.adopt(id: current, since: since, head: head, renewed: true)
        adopted(head)
        return current
    }
}
