import Logging
import PostgresNIO

/// The read behind "revoked tokens": log entries committed by revoked devices
/// since their revocation.
extension VerdictDatabase {
    /// nil when `revsync_devices` has no `revoked_at` column (a server from before revocation).
    static func revocations(on connection: PostgresConnection, logger: Logger) async throws -> RevocationAudit? {
        let columns = try await connection.query(
            """
            SELECT count(*) FROM information_schema.columns
            WHERE table_schema = current_schema() AND table_name = 'revsync_devices' AND column_name = 'revoked_at'
            """, logger: logger
        ).collect()
        guard try columns.first?.decode(Int64.self) == 1 else { return nil }
        var revoked: Set<String> = []
        let revokedRows = try await connection.query(
            "SELECT public_id::text FROM revsync_devices WHERE revoked_at IS NOT NULL", logger: logger)
        for try await device in revokedRows.decode(String.self) { revoked.insert(device) }
        // committed_at is the committing transaction's start: one that began at or after
        // the revocation must have been refused.
        let rows = try await connection.query(
            """
            SELECT d.public_id::text, d.revoked_at::text, count(*), min(l.revision)
            FROM revsync_devices AS d JOIN revsync_log AS l ON l.device_id = d.id AND l.committed_at >= d.revoked_at
            WHERE d.revoked_at IS NOT NULL
            GROUP BY d.public_id, d.revoked_at
            ORDER BY min(l.revision)
            """, logger: logger)
        var commits: [CommitAfterRevocation] = []
        for try await (device, revokedAt, entries, first) in rows.decode((String, String, Int64, Int64).self) {
            commits.append(CommitAfterRevocation(device: device, revokedAt: revokedAt, entries: entries, firstRevision: first))
        }
        return RevocationAudit(revoked: revoked, commitsAfter: commits)
    }
}
