import Logging
import PostgresNIO

/// The log audit: SQL over `revsync_head`, `revsync_log` and `revsync_outcomes`.
extension VerdictDatabase {
    static func audit(on connection: PostgresConnection, logger: Logger) async throws -> LogAudit {
        let gaps = try await gaps(on: connection, logger: logger)
        let (committed, repeated) = try await committed(horizon: gaps.horizon, on: connection, logger: logger)
        return LogAudit(
            gaps: gaps, committed: committed, repeated: repeated,
            duplicates: try await duplicateTemporaryIds(on: connection, logger: logger),
            rejections: try await rejections(on: connection, logger: logger))
    }

    static func gaps(on connection: PostgresConnection, logger: Logger) async throws -> LogGaps {
        let headRows = try await connection.query("SELECT h.head, z.horizon FROM revsync_head AS h, revsync_horizon AS z", logger: logger).collect()
        guard let headRow = headRows.first else { throw VerdictError("revsync_head has no row") }
        let (head, horizon) = try headRow.decode((Int64, Int64).self)
        let missingRows = try await connection.query(
            """
            SELECT count(*) FILTER (WHERE l.revision IS NULL), min(s.revision) FILTER (WHERE l.revision IS NULL)
            FROM generate_series(\(horizon + 1), \(head)) AS s(revision)
            LEFT JOIN revsync_log AS l ON l.revision = s.revision
            """, logger: logger
        ).collect()
        let (missing, firstMissing) = try missingRows.first?.decode((Int64, Int64?).self) ?? (Int64(0), nil)
        // Entries at or below the horizon may outlive it briefly: the pruner moves the horizon
        // first, then deletes in bounded batches. Entries above the head must never exist.
        let outsideRows = try await connection.query(
            "SELECT count(*) FROM revsync_log WHERE revision > \(head)", logger: logger
        ).collect()
        let outOfRange = try outsideRows.first?.decode(Int64.self) ?? 0
        return LogGaps(head: head, horizon: horizon, missing: missing, firstMissing: firstMissing, outOfRange: outOfRange)
    }

    /// The (device, seq) pairs of the retained log (and those a second time), then
    /// those whose entries the pruner removed, known from their outcomes.
    static func committed(
        horizon: Int64, on connection: PostgresConnection, logger: Logger
    ) async throws -> (Set<ChangeSetRef>, [ChangeSetRef]) {
        var committed: Set<ChangeSetRef> = []
        var repeated: [ChangeSetRef] = []
        let logged = try await connection.query(
            """
            SELECT d.public_id::text, l.seq FROM revsync_log AS l JOIN revsync_devices AS d ON d.id = l.device_id
            WHERE l.seq IS NOT NULL
            """, logger: logger)
        for try await (device, seq) in logged.decode((String, Int64).self) {
            let pair = ChangeSetRef(device: device, seq: seq)
            if !committed.insert(pair).inserted { repeated.append(pair) }
        }
        let pruned = try await connection.query(
            """
            SELECT d.public_id::text, o.seq FROM revsync_outcomes AS o JOIN revsync_devices AS d ON d.id = o.device_id
            WHERE o.revision IS NOT NULL AND o.revision <= \(horizon)
            """, logger: logger)
        for try await (device, seq) in pruned.decode((String, Int64).self) {
            committed.insert(ChangeSetRef(device: device, seq: seq))
        }
        return (committed, repeated.sorted())
    }

    /// `(device, entity, __oldId__)` triples in more than one author body: one
    /// temporary id that became several records.
    static func duplicateTemporaryIds(on connection: PostgresConnection, logger: Logger) async throws -> [DuplicateTemporaryId] {
        // Entity objects are the author body's object-valued keys (the others are
        // conflict, revision, seq and types); only created records carry __oldId__.
        let rows = try await connection.query(
            """
            SELECT d.public_id::text, e.key, (a.value->>'__oldId__')::bigint,
                   array_agg(a.key::bigint ORDER BY l.revision), array_agg(l.revision ORDER BY l.revision)
            FROM revsync_log AS l
            JOIN revsync_devices AS d ON d.id = l.device_id
            CROSS JOIN LATERAL jsonb_each(l.author_body::jsonb) AS e(key, value)
            CROSS JOIN LATERAL jsonb_each(
                CASE WHEN jsonb_typeof(e.value->'attributes') = 'object' THEN e.value->'attributes' END) AS a(key, value)
            WHERE a.value ? '__oldId__'
            GROUP BY 1, 2, 3
            HAVING count(*) > 1
            ORDER BY min(l.revision)
            """, logger: logger)
        var duplicates: [DuplicateTemporaryId] = []
        for try await (device, entity, temporaryId, ids, revisions) in rows.decode((String, String, Int64, [Int64], [Int64]).self) {
            duplicates.append(DuplicateTemporaryId(device: device, entity: entity, temporaryId: temporaryId, ids: ids, revisions: revisions))
        }
        return duplicates
    }

    static func rejections(on connection: PostgresConnection, logger: Logger) async throws -> [ServerRejection] {
        let rows = try await connection.query(
            """
            SELECT d.public_id::text, o.seq, coalesce(o.reason::jsonb->>'code', o.reason)
            FROM revsync_outcomes AS o JOIN revsync_devices AS d ON d.id = o.device_id
            WHERE o.reason IS NOT NULL
            ORDER BY 1, 2
            """, logger: logger)
        var rejections: [ServerRejection] = []
        for try await (device, seq, code) in rows.decode((String, Int64, String).self) {
            rejections.append(ServerRejection(changeSet: ChangeSetRef(device: device, seq: seq), code: code))
        }
        return rejections
    }
}
