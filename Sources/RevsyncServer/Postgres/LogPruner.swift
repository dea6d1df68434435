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

    /// Moves the horizon to `head - retention` and deletes the log up to it. Returns the horizon.
    @discardableResult
    public func pruneOnce() async throws -> Int64 {
        let logger = database.logger
        let retention = self.retention
        let horizon = try await database.transaction { connection in
            let rows = try await connection.rows(
                "UPDATE revsync_head SET horizon = GREATEST(horizon, head - \(retention)) RETURNING horizon", logger)
            let horizon = try rows.first?.decode(Int64.self) ?? 0
            try await connection.run("DELETE FROM revsync_log WHERE revision <= \(horizon)", logger)
            // Rejections made before the horizon go with the log: a device that old bootstraps anew,
            // and a repeat of such a seq is refused as `seq_reused` (its outcome is no longer kept).
            try await connection.run("DELETE FROM revsync_outcomes WHERE revision IS NULL AND head_at <= \(horizon)", logger)
            return horizon
        }
        await afterPrune?()
        return horizon
    }
}

/// Sleeps for `duration` or until graceful shutdown begins.
private func gracefulShutdownSleep(_ duration: Duration) async throws {
    try await cancelWhenGracefulShutdown {
        try await Task.sleep(for: duration)
    }
}
