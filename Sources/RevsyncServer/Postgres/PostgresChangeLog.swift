import NIOCore
import PostgresNIO
import RevsyncRules

/// The change log read straight from PostgreSQL.
public struct PostgresChangeLog: ChangeLog {
    let database: Database

    public init(database: Database) { self.database = database }

    public func state() async throws -> LogState {
        let logger = database.logger
        let rows = try await database.withConnection { connection in
            try await connection.rows("SELECT h.head, z.horizon FROM revsync_head AS h, revsync_horizon AS z", logger)
        }
        guard let row = rows.first else { throw StoreError.inconsistent("revsync_head is empty: run `revsync migrate`") }
        let (head, horizon) = try row.decode((Int64, Int64).self)
        return LogState(head: head, horizon: horizon)
    }

    public func authoritativeState() async throws -> LogState { try await state() }

    public func didCommit(_ entries: [CommittedEntry]) async {}

    public func entries(
        after revision: Int64, through head: Int64, for device: Device, limits: CatchUpLimits, authored: [Int64: ByteBuffer] = [:]
    ) async throws -> CatchUpPage {
        let logger = database.logger
        let count = limits.maxChangeSets + 1
        let rows = try await database.withConnection { connection in
            try await connection.rows(
                """
                SELECT revision, CASE WHEN device_id = \(device.id) THEN author_body ELSE body END
                FROM revsync_log WHERE revision > \(revision) ORDER BY revision LIMIT \(count)
                """, logger)
        }
        var pager = CatchUpPager(limits: limits)
        var entries: [LogEntry] = []
        for row in rows {
            let (number, body) = try row.decode((Int64, ByteBuffer).self)
            guard pager.admit(size: body.readableBytes) else { break }
            entries.append(LogEntry(revision: number, bytes: body))
        }
        return CatchUpPage(entries: entries, more: pager.full)
    }

    /// Whole entries (both forms) of the given revisions that the log still holds, in order.
    func committedEntries(_ revisions: [Int64]) async throws -> [CommittedEntry] {
        guard !revisions.isEmpty else { return [] }
        let logger = database.logger
        let rows = try await database.withConnection { connection in
            try await connection.rows(
                "SELECT revision, device_id, body, author_body FROM revsync_log WHERE revision = ANY(\(revisions)) ORDER BY revision", logger)
        }
        return try rows.map { row in
            let (revision, device, body, author) = try row.decode((Int64, Int64, ByteBuffer, ByteBuffer).self)
            return CommittedEntry(revision: revision, deviceId: device, body: body, authorBody: author)
        }
    }

    /// The database's instance id, which names its cache keys.
    ///
    /// The stored uuid alone would be copied by a dump and restore or a template copy,
    /// and two databases would then share keys; the cluster's system identifier (new with
    /// every initdb) and the database's oid (new with every CREATE DATABASE) are not.
    public func instance() async throws -> String {
        let logger = database.logger
        let rows = try await database.withConnection { connection in
            try await connection.rows(
                """
                SELECT h.instance::text, (SELECT oid::text FROM pg_database WHERE datname = current_database()) FROM revsync_head h
                """, logger)
        }
        guard let row = rows.first else { throw StoreError.inconsistent("revsync_head is empty: run `revsync migrate`") }
        let (uuid, oid) = try row.decode((String, String).self)
        // Some hosted services refuse pg_control_system(); the oid still tells template copies apart.
        let system = try? await database.withConnection { connection in
            try await connection.rows("SELECT system_identifier::text FROM pg_control_system()", logger).first?.decode(String.self)
        }
        return [uuid, (system ?? nil) ?? "0", oid].joined(separator: "-")
    }

    /// The MD5 of the public body of `revision`, or nil when the log no longer has it.
    func bodyDigest(_ revision: Int64) async throws -> String? {
        let logger = database.logger
        let rows = try await database.withConnection { connection in
            try await connection.rows("SELECT md5(body) FROM revsync_log WHERE revision = \(revision)", logger)
        }
        return try rows.first?.decode(String.self)
    }

    public func authorEntries(_ revisions: [Int64], for device: Device) async throws -> [LogEntry] {
        guard !revisions.isEmpty else { return [] }
        let logger = database.logger
        let rows = try await database.withConnection { connection in
            try await connection.rows(
                "SELECT revision, author_body FROM revsync_log WHERE revision = ANY(\(revisions)) AND device_id = \(device.id) ORDER BY revision",
                logger)
        }
        return try rows.map { row in
            let (number, body) = try row.decode((Int64, ByteBuffer).self)
            return LogEntry(revision: number, bytes: body)
        }
    }
}
