import PostgresNIO
import RevsyncRules

/// What the cache's reconciler reads of PostgreSQL once a `REVSYNC_CACHE_RECONCILE_MS`, in
/// one query: the log's head and horizon, the history id (which serves `HistoryWatch` when
/// its check is due), the count of device changes (which `DeviceChangeWatcher` compares),
/// and the digest of the entry the cache holds at its head.
///
/// Before, these were three queries (the state, the history, the digest), each with a lease
/// and a round trip of its own: with the cache's reads and raises and the device counter's
/// read, an idle instance made eight round trips a second; now three, and it uses about a
/// tenth of a percent of a core less (docs/performance.md).
struct HeadReading: Sendable {
    let state: LogState
    let history: (id: String, since: HistorySince)
    /// `revsync_device_changes.version`: moves with every revocation, rotation and role change.
    let deviceChanges: Int64
    /// `md5(body)` of the entry asked for; nil when none was asked for or PostgreSQL has none.
    let digest: String?

    var historyRead: (head: Int64, id: String, since: HistorySince) { (state.head, history.id, history.since) }
}

extension PostgresChangeLog {
    /// Reads `HeadReading`, with the digest of the entry at `revision` when given.
    func readHead(digestOf revision: Int64?) async throws -> HeadReading {
        let logger = database.logger
        // No entry is numbered 0 or below: asking for one gives a NULL digest.
        let asked = revision ?? 0
        let rows = try await database.withConnection { connection in
            try await connection.rows(
                """
                SELECT h.head, z.horizon, h.history::text, \(unescaped: PostgresHistory.sinceMicroseconds(of: "h")),
                       (SELECT version FROM revsync_device_changes), (SELECT md5(body) FROM revsync_log WHERE revision = \(asked))
                FROM revsync_head AS h, revsync_horizon AS z
                """, logger)
        }
        guard let row = rows.first else { throw StoreError.inconsistent("revsync_head is empty: run `revsync migrate`") }
        let (head, horizon, id, since, deviceChanges, digest) = try row.decode((Int64, Int64, String, Int64?, Int64?, String?).self)
        return HeadReading(
            state: LogState(head: head, horizon: horizon), history: (id, HistorySince(microseconds: since)),
            deviceChanges: deviceChanges ?? 0, digest: digest)
    }
}
