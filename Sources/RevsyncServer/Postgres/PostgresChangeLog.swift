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

    public func didCommit(_ entries: [CommittedEntry]) async -> CommitPublication { .done }

    /// Reads no more bodies than the page takes: PostgreSQL sums the sizes as it goes and sends
    /// a body only for rows the page admits (the first row always, then while the bytes fit).
    /// The row after the last admitted one tells that the log holds more; it comes without its body.
    public func entries(
        after revision: Int64, through head: Int64, for device: Device, limits: CatchUpLimits, form: EntryForm = .plain, own: Set<Int64> = []
    ) async throws -> CatchUpPage {
        let logger = database.logger
        let (count, maxBytes) = (limits.maxChangeSets, limits.maxBytes)
        let rows = try await database.withConnection { connection in
            try await connection.rows(
                """
                SELECT revision, size, CASE WHEN n <= \(count) AND (n = 1 OR running <= \(maxBytes)) THEN body END, device_id
                FROM (
                    SELECT revision, body, device_id, octet_length(body) AS size,
                           sum(octet_length(body)) OVER (ORDER BY revision) AS running,
                           row_number() OVER (ORDER BY revision) AS n
                    FROM (SELECT revision, device_id, CASE WHEN device_id = \(device.id) THEN author_body ELSE body END AS body
                          FROM revsync_log WHERE revision > \(revision) ORDER BY revision LIMIT \(count + 1)) AS log
                ) AS page
                WHERE n <= 2 OR running - size <= \(maxBytes)
                ORDER BY revision
                """, logger)
        }
        var pager = CatchUpPager(limits: limits)
        var entries: [LogEntry] = []
        var authors: Set<Int64> = []
        for row in rows {
            let (number, size, body, author) = try row.decode((Int64, Int32, ByteBuffer?, Int64).self)
            guard pager.admit(size: Int(size)), let body else { break }
            entries.append(LogEntry(revision: number, bytes: body))
            authors.insert(author)
        }
        return CatchUpPage(entries: entries, more: pager.full, authors: authors)
    }

    /// Whole entries (both forms) from `first` on, in order, as far as the log holds them: at
    /// most `limits.maxChangeSets`, and no more public bytes than a page takes (plus the one
    /// that does not fit, whose size the page needs to end).
    func committedEntries(from first: Int64, through last: Int64, limits: CatchUpLimits) async throws -> [CommittedEntry] {
        guard last >= first else { return [] }
        let logger = database.logger
        let (count, maxBytes) = (limits.maxChangeSets, limits.maxBytes)
        let rows = try await database.withConnection { connection in
            try await connection.rows(
                """
                SELECT revision, device_id, body, author_body FROM (
                    SELECT revision, device_id, body, author_body, octet_length(body) AS size,
                           sum(octet_length(body)) OVER (ORDER BY revision) AS running
                    FROM (SELECT * FROM revsync_log WHERE revision BETWEEN \(first) AND \(last) ORDER BY revision LIMIT \(count)) AS log
                ) AS page
                WHERE revision <= \(first) + 1 OR running - size <= \(maxBytes)
                ORDER BY revision
                """, logger)
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
