import Foundation
import Logging
import NIOCore
import PostgresNIO
import RevsyncRules
import RevsyncWire

/// One change set's statements on one connection: it loads facts with their locks and
/// writes what the rules decided. It decides nothing itself.
struct PostgresApplyTransaction: ApplyTransaction {
    let connection: PostgresConnection
    let schema: DatasetSchema
    let logger: Logger
    let delay: ApplyDelay?

    // MARK: LedgerReading

    func lastSeq(_ device: Device) async throws -> Int64 {
        let rows = try await connection.rows("SELECT last_seq FROM revsync_devices WHERE id = \(device.id)", logger)
        guard let row = rows.first else { throw SyncRefusal.deviceGone }
        return try row.decode(Int64.self)
    }

    func mappings(_ ids: Set<Int64>, device: Device) async throws -> [Int64: TemporaryIdMapping] {
        guard !ids.isEmpty else { return [:] }
        let list = Array(ids)
        let rows = try await connection.rows(
            "SELECT temp_id, entity, id FROM revsync_temp_ids WHERE device_id = \(device.id) AND temp_id = ANY(\(list))", logger)
        var known: [Int64: TemporaryIdMapping] = [:]
        for row in rows {
            let (temporaryId, entity, id) = try row.decode((Int64, String, Int64).self)
            known[temporaryId] = TemporaryIdMapping(entity: entity, id: id)
        }
        return known
    }

    func digests(_ seqs: [Int64], device: Device) async throws -> [Int64: [UInt8]?] {
        let rows = try await connection.rows(
            "SELECT seq, digest FROM revsync_outcomes WHERE device_id = \(device.id) AND seq = ANY(\(seqs))", logger)
        var digests: [Int64: [UInt8]?] = [:]
        for row in rows {
            let (seq, digest) = try row.decode((Int64, ByteBuffer?).self)
            digests[seq] = digest.map { Array($0.readableBytesView) }
        }
        return digests
    }

    func lowestTemporaryId(_ device: Device) async throws -> Int64 {
        let rows = try await connection.rows("SELECT COALESCE(min(temp_id), 0) FROM revsync_temp_ids WHERE device_id = \(device.id)", logger)
        return try rows.first?.decode(Int64.self) ?? 0
    }

    // MARK: Locks and facts

    /// With a seq, the lock serialises the device's change sets (`FOR NO KEY UPDATE`, which
    /// the log's foreign key check does not wait for); without one a shared lock is
    /// enough. Either way a revocation, which updates the row, waits for the change set,
    /// and a change set that comes after it sees the revocation.
    func lockDevice(_ device: Device, forSeq: Bool) async throws -> DeviceLock? {
        let rows = try await connection.rows(
            forSeq
                ? "SELECT last_seq, revoked_at IS NOT NULL FROM revsync_devices WHERE id = \(device.id) FOR NO KEY UPDATE"
                : "SELECT last_seq, revoked_at IS NOT NULL FROM revsync_devices WHERE id = \(device.id) FOR SHARE",
            logger)
        guard let row = rows.first else { return nil }
        let (last, revoked) = try row.decode((Int64, Bool).self)
        return DeviceLock(lastSeq: last, revoked: revoked)
    }

    func storedOutcome(seq: Int64, device: Device) async throws -> StoredOutcome? {
        let rows = try await connection.rows(
            "SELECT revision, reason, change_set, digest FROM revsync_outcomes WHERE device_id = \(device.id) AND seq = \(seq)", logger)
        guard let row = rows.first else { return nil }
        let (revision, reasonText, changeSetText, digest) = try row.decode((Int64?, String?, String?, ByteBuffer?).self)
        let decoder = JSONDecoder()
        return StoredOutcome(
            revision: revision,
            reason: try reasonText.map { try decoder.decode(ConflictReason.self, from: Data($0.utf8)) },
            changeSet: try changeSetText.map { try decoder.decode(ChangeSet.self, from: Data($0.utf8)) },
            digest: digest.map { Array($0.readableBytesView) })
    }

    func lockVersions(_ keys: [RecordKey]) async throws -> [RecordKey: RecordVersion] {
        var versions: [RecordKey: RecordVersion] = [:]
        for (entity, group) in Dictionary(grouping: keys, by: \.entity).sorted(by: { $0.key < $1.key }) {
            let ids = group.map(\.id).sorted()
            let rows = try await connection.rows(
                """
                SELECT id, revision, rs_writer, rs_other_revision FROM \(unescaped: SQLIdentifier.quoted(entity))
                WHERE id = ANY(\(ids)) ORDER BY id FOR UPDATE
                """, logger)
            for row in rows {
                let (id, revision, writer, other) = try row.decode((Int64, Int64, Int64, Int64).self)
                versions[RecordKey(entity, id)] = RecordVersion(revision: revision, writer: writer, otherRevision: other)
            }
        }
        return versions
    }

    func lockReferenced(_ keys: [RecordKey]) async throws -> Set<RecordKey> {
        var found: Set<RecordKey> = []
        for (entity, group) in Dictionary(grouping: keys, by: \.entity).sorted(by: { $0.key < $1.key }) {
            let ids = group.map(\.id).sorted()
            // KEY SHARE keeps them from being deleted until this change set commits.
            let rows = try await connection.rows(
                "SELECT id FROM \(unescaped: SQLIdentifier.quoted(entity)) WHERE id = ANY(\(ids)) FOR KEY SHARE", logger)
            for row in rows { found.insert(RecordKey(entity, try row.decode(Int64.self))) }
        }
        return found
    }

    func lockChildren(_ relation: Relation, parents: [Int64]) async throws -> [ApplyPlanner.Child] {
        let rows = try await connection.rows(
            """
            SELECT id, \(unescaped: SQLIdentifier.quoted(relation.attribute)), revision, rs_writer, rs_other_revision
            FROM \(unescaped: SQLIdentifier.quoted(relation.child))
            WHERE \(unescaped: SQLIdentifier.quoted(relation.attribute)) = ANY(\(parents)) ORDER BY id FOR UPDATE
            """, logger)
        return try rows.map { row in
            let (child, parent, revision, writer, other) = try row.decode((Int64, Int64, Int64, Int64, Int64).self)
            return ApplyPlanner.Child(id: child, parent: parent, version: RecordVersion(revision: revision, writer: writer, otherRevision: other))
        }
    }

    func allocateIds(_ entity: String, count: Int) async throws -> [Int64] {
        let rows = try await connection.rows(
            "SELECT nextval(pg_get_serial_sequence(\(SQLIdentifier.quoted(entity)), 'id')) FROM generate_series(1, \(count))", logger)
        return try rows.map { try $0.decode(Int64.self) }.sorted()
    }

    // MARK: Writes

    func write(_ plan: WritePlan, digest: [UInt8], device: Device) async throws -> CommittedEntry {
        // The rules decided the conflicts; the savepoint only catches what PostgreSQL enforces on top.
        try await connection.run("SAVEPOINT change_set", logger)
        do {
            for insert in plan.inserts { try await self.insert(insert, device: device) }
            for update in plan.updates { try await self.update(update) }
            for delete in plan.deletes {
                try await connection.run("DELETE FROM \(unescaped: SQLIdentifier.quoted(delete.entity)) WHERE id = ANY(\(delete.ids))", logger)
            }
            try await remember(plan.createdIds, seq: plan.seq, device: device)
            // Foreign keys are deferred so creates may come in any order; check them now,
            // before the revision lock, so a violation rejects this change set alone.
            try await connection.run("SET CONSTRAINTS ALL IMMEDIATE", logger)
        } catch {
            guard let reason = Self.conflict(from: error) else { throw error }
            try await connection.run("ROLLBACK TO SAVEPOINT change_set", logger)
            throw reason
        }
        if let seq = plan.seq {
            try await connection.run("UPDATE revsync_devices SET last_seq = \(seq) WHERE id = \(device.id)", logger)
        }
        let entry = try await stamp(plan, digest: digest, device: device)
        // Between the stamp and COMMIT, where a writer that let a later revision commit first would show.
        if let delay { await delay() }
        return entry
    }

    func recordRejection(_ reason: ConflictReason, seq: Int64, digest: [UInt8], device: Device) async throws {
        let reasonText = String(decoding: try JSONEncoder().encode(reason), as: UTF8.self)
        let digestBytes = ByteBuffer(bytes: digest)
        // The change set itself is not kept: a retry must carry the same content (its digest), so the
        // retry's own copy serves for the fresh corrective set. head_at lets the pruner drop it with the log.
        try await connection.run(
            """
            INSERT INTO revsync_outcomes (device_id, seq, reason, digest, head_at)
            SELECT \(device.id), \(seq), \(reasonText), \(digestBytes), head FROM revsync_head
            """, logger)
        try await connection.run("UPDATE revsync_devices SET last_seq = \(seq) WHERE id = \(device.id)", logger)
    }

    private func insert(_ write: AttributeWrite, device: Device) async throws {
        guard let definition = schema.entity(named: write.entity), !write.records.isEmpty else { return }
        let recordset = RecordsetJSON(definition, names: write.names)
        let columns = write.names.map(SQLIdentifier.quoted).joined(separator: ", ")
        let values = write.names.map { "r." + SQLIdentifier.quoted($0) }.joined(separator: ", ")
        try await connection.run(
            """
            INSERT INTO \(unescaped: SQLIdentifier.quoted(write.entity)) (id, revision, rs_writer, rs_other_revision, \(unescaped: columns))
            SELECT r.id, 0, r.rs_writer, r.rs_other_revision, \(unescaped: values)
            FROM jsonb_to_recordset(\(recordset.json(write.records))::jsonb) AS r(\(unescaped: recordset.columnDefinitions))
            """, logger)
    }

    /// Sets the attributes and the write history the rules worked out.
    private func update(_ write: AttributeWrite) async throws {
        guard let definition = schema.entity(named: write.entity), !write.records.isEmpty else { return }
        let recordset = RecordsetJSON(definition, names: write.names)
        let assignments = (write.names.map { "\(SQLIdentifier.quoted($0)) = r.\(SQLIdentifier.quoted($0))" } + [
            "rs_writer = r.rs_writer", "rs_other_revision = r.rs_other_revision",
        ]).joined(separator: ", ")
        try await connection.run(
            """
            UPDATE \(unescaped: SQLIdentifier.quoted(write.entity)) AS t SET \(unescaped: assignments)
            FROM jsonb_to_recordset(\(recordset.json(write.records))::jsonb) AS r(\(unescaped: recordset.columnDefinitions))
            WHERE t.id = r.id
            """, logger)
    }

    private func remember(_ created: [CreatedId], seq: Int64?, device: Device) async throws {
        guard !created.isEmpty else { return }
        let temporary = created.map(\.temporaryId)
        let entities = created.map(\.entity)
        let permanent = created.map(\.id)
        try await connection.run(
            """
            INSERT INTO revsync_temp_ids (device_id, temp_id, entity, id, seq)
            SELECT \(device.id), u.temp_id, u.entity, u.id, \(seq) FROM unnest(\(temporary)::bigint[], \(entities)::text[], \(permanent)::bigint[]) AS u(temp_id, entity, id)
            """, logger)
    }

    /// Takes the next revision and stamps it on every written record and on the log
    /// entry, in one statement: the revision lock is held only from here to COMMIT.
    private func stamp(_ plan: WritePlan, digest: [UInt8], device: Device) async throws -> CommittedEntry {
        var binds = PostgresBindings()
        binds.append(device.id)
        binds.append(plan.seq)
        binds.append(String(decoding: plan.body, as: UTF8.self))
        binds.append(String(decoding: plan.authorBody, as: UTF8.self))
        binds.append(ByteBuffer(bytes: digest))
        var sql = "WITH h AS (UPDATE revsync_head SET head = head + 1 WHERE singleton RETURNING head)"
        let written = Dictionary(grouping: plan.applied.writtenKeys, by: \.entity)
        for (index, entity) in written.keys.sorted().enumerated() {
            binds.append(written[entity, default: []].map(\.id))
            sql += ", s\(index) AS (UPDATE \(SQLIdentifier.quoted(entity)) SET revision = (SELECT head FROM h) WHERE id = ANY($\(binds.count)::bigint[]))"
        }
        if plan.seq != nil {
            sql += ", o AS (INSERT INTO revsync_outcomes (device_id, seq, revision, digest) SELECT $1, $2, head, $5 FROM h)"
        }
        sql += """
             INSERT INTO revsync_log (revision, device_id, seq, body, author_body)
            SELECT head, $1, $2, replace($3, chr(1), head::text), replace($4, chr(1), head::text) FROM h RETURNING revision
            """
        let rows = try await connection.rows(PostgresQuery(unsafeSQL: sql, binds: binds), logger)
        guard let revision = try rows.first?.decode(Int64.self) else {
            throw StoreError.inconsistent("stamping the revision returned nothing: is revsync_head empty? run `revsync migrate`")
        }
        // The same substitution PostgreSQL made, so caches get the stored bytes without reading them back.
        return CommittedEntry(
            revision: revision, deviceId: device.id,
            body: ByteBuffer(bytes: LogEntryEncoder.substitute(plan.body, revision: revision)),
            authorBody: ByteBuffer(bytes: LogEntryEncoder.substitute(plan.authorBody, revision: revision)))
    }

    /// A constraint PostgreSQL enforced as a safety net, as the conflict it means.
    private static func conflict(from error: any Error) -> ConflictReason? {
        if let reason = error as? ConflictReason { return reason }
        guard let error = error as? PSQLError, let state = error.sqlState else { return nil }
        return ConflictRules.enforcedByDatabase(
            sqlState: state, table: error.serverInfo?[.tableName], detail: error.serverInfo?[.detail] ?? error.serverInfo?[.message] ?? "",
            message: error.serverInfo?[.message])
    }
}
