import Logging
import PostgresNIO
import ServiceLifecycle

/// Keeps the change log to its configured length; devices older than the kept
/// part get `snapshot_required` and bootstrap from `/snapshot`.
public struct LogPruner: Service {
    let database: Database
    /// Change sets to keep; 0 keeps everything.
    let retention: Int64
    let interval: Duration
    /// Tells a cache the new horizon at once (devices below it must bootstrap).
    var afterPrune: (@Sendable () async -> Void)? = nil
    /// Rows deleted per transaction.
    var batch: Int64 = 10_000

    public func run() async throws {
        // A service that returns ends the whole group, so an idle pruner waits for shutdown.
        guard retention > 0 else { return try await gracefulShutdown() }
        // Waiting first also lets the server's migrations finish before the first run.
        while !Task.isShuttingDownGracefully && !Task.isCancelled {
            try? await gracefulShutdownSleep(interval)
            guard !Task.isShuttingDownGracefully, !Task.isCancelled else { break }
            do {
                try await pruneOnce()
            } catch {
                database.logger.warning("pruning the change log failed", metadata: ["error": "\(String(reflecting: error))"])
            }
        }
    }

    /// Moves the horizon to `head - retention`, then deletes the log below it in bounded
    /// batches. Returns the horizon.
    ///
    /// The horizon has its own row, so neither step takes the revision lock: writers never
    /// wait for the pruner. Each batch is its own short transaction, so a first prune of a
    /// large log (retention just enabled) makes progress in steps instead of one DELETE
    /// that outlives every timeout and starts over.
    @discardableResult
    public func pruneOnce() async throws -> Int64 {
        let logger = database.logger
        let retention = self.retention, batch = self.batch
        let horizon = try await database.transaction { connection in
            let rows = try await connection.rows(
                """
                UPDATE revsync_horizon SET horizon = GREATEST(horizon, (SELECT head FROM revsync_head) - \(retention)) RETURNING horizon
                """, logger)
            return try rows.first?.decode(Int64.self) ?? 0
        }
        // Caches learn the horizon before the entries go: devices below it bootstrap anew.
        await afterPrune?()
        while try await deleteBatch(
            """
            WITH gone AS (DELETE FROM revsync_log WHERE revision IN (
                SELECT revision FROM revsync_log WHERE revision <= \(horizon) ORDER BY revision LIMIT \(batch)) RETURNING 1)
            SELECT count(*)::bigint FROM gone
            """) == batch {}
        // Rejections made before the horizon go with the log: a device that old bootstraps anew,
        // and a repeat of such a seq is refused as `seq_reused` (its outcome is no longer kept).
        while try await deleteBatch(
            """
            WITH gone AS (DELETE FROM revsync_outcomes WHERE ctid IN (
                SELECT ctid FROM revsync_outcomes WHERE revision IS NULL AND head_at <= \(horizon) LIMIT \(batch)) RETURNING 1)
            SELECT count(*)::bigint FROM gone
            """) == batch {}
        return horizon
    }

    /// Runs one bounded DELETE in its own transaction; returns how many rows it removed.
    private func deleteBatch(_ query: PostgresQuery) async throws -> Int64 {
        let logger = database.logger
        return try await database.transaction { connection in
            try await connection.rows(query, logger).first?.decode(Int64.self) ?? 0
        }
    }
}

/// Sleeps for `duration` or until graceful shutdown begins.
private func gracefulShutdownSleep(_ duration: Duration) async throws {
    try await cancelWhenGracefulShutdown {
        try await Task.sleep(for: duration)
    }
}
