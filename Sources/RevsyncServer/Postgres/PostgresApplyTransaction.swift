import Foundation
import Logging
import NIOCore
import PostgresNIO
import RevsyncRules
import RevsyncWire

/// One batch's statements on one connection (`PipelinedTransaction`): it loads facts with
/// their locks and writes what the rules decided. It decides nothing itself.
struct PostgresApplyTransaction: ApplyTransaction {
    let transaction: PipelinedTransaction
    let schema: DatasetSchema
    let delay: ApplyDelay?

    var connection: PostgresConnection { transaction.connection }
    var logger: Logger { transaction.logger }

    // MARK: LedgerReading

    func mappings(_ ids: Set<Int64>, device: Device) async throws -> [Int64: TemporaryIdMapping] {
        try await mappings([device.id: ids], allocating: [:]).known[device.id] ?? [:]
    }

    func lowestTemporaryId(_ device: Device) async throws -> Int64 {
        let rows = try await fetch("SELECT COALESCE(min(temp_id), 0) FROM revsync_temp_ids WHERE device_id = \(device.id)")
        return try rows.first?.decode(Int64.self) ?? 0
    }

    // MARK: Locks and facts

    /// One batch's devices, in id order, and their mappings, in one statement.
    /// `FOR NO KEY UPDATE` serialises a device's change sets across batches and instances,
    /// and the log's foreign key check (a `KEY SHARE` lock) does not wait for it. A
    /// revocation, which updates the row, waits for the batch, and a batch that comes after
    /// it sees the revocation. Its snapshot is taken before it waits for
    /// a device's row, so the mappings of a batch that committed meanwhile are not in it; but
    /// such a batch changed the row (its last seq, or the row alone for ids created without
    /// seq: `ledger`), and the row locked is then a newer version than the snapshot's. Those
    /// devices' mappings are read again, now that their rows are held.
    func lockDevices(_ ids: [Int64], mappings wanted: [Int64: Set<Int64>], allocating counts: [String: Int]) async throws -> LockedDevices {
        let rows = try await fetch(Self.lockAndMappingsQuery(ids, wanted: wanted, allocating: counts))
        var locked = LockedDevices(locks: [:], known: [:], ids: [:])
        var changed: Set<Int64> = []
        for row in rows {
            let (kind, device, number, entity, value) = try row.decode((Int16, Int64, Int64, String, Int64).self)
            switch kind {
            case 0:
                locked.locks[device] = DeviceLock(lastSeq: number, revoked: value & 1 != 0)
                if value & 2 != 0 { changed.insert(device) }
            case 1:
                locked.known[device, default: [:]][number] = TemporaryIdMapping(entity: entity, id: value)
            default:
                locked.ids[entity, default: []].append(value)
            }
        }
        locked.ids = locked.ids.mapValues { $0.sorted() }
        let again = wanted.filter { changed.contains($0.key) && !$0.value.isEmpty }
        if !again.isEmpty {
            let fresh = try await mappings(again, allocating: [:]).known
            for device in again.keys { locked.known[device] = fresh[device] }
        }
        return locked
    }

    /// Rows of kind 0 are the locked devices (last seq; bit 1 revoked, bit 2 changed since the
    /// snapshot), 1 the mappings, 2 the new ids. The device rows are locked in id order first
    /// (the CTE is materialized, and UNION ALL runs its parts in order).
    static func lockAndMappingsQuery(_ ids: [Int64], wanted: [Int64: Set<Int64>], allocating counts: [String: Int]) -> PostgresQuery {
        let (devices, temporary, entities, numbers) = arrays(wanted, allocating: counts)
        return """
            WITH locked AS MATERIALIZED (
                SELECT id, last_seq, revoked_at IS NOT NULL AS revoked, xmin AS version FROM revsync_devices
                WHERE id = ANY(\(ids)::bigint[]) ORDER BY id FOR NO KEY UPDATE)
            SELECT 0::int2, l.id, l.last_seq, '', CASE WHEN l.revoked THEN 1 ELSE 0 END + CASE WHEN l.version = s.xmin THEN 0 ELSE 2 END
            FROM locked AS l JOIN revsync_devices AS s ON s.id = l.id
            UNION ALL
            SELECT 1::int2, t.device_id, t.temp_id, t.entity, t.id FROM unnest(\(devices)::bigint[], \(temporary)::bigint[]) AS u(device_id, temp_id)
            JOIN revsync_temp_ids AS t USING (device_id, temp_id)
            UNION ALL
            SELECT 2::int2, 0, 0, u.entity, nextval(pg_get_serial_sequence(quote_ident(u.entity), 'id'))
            FROM unnest(\(entities)::text[], \(numbers)::bigint[]) AS u(entity, n), generate_series(1, u.n)
            """
    }

    func mappings(_ wanted: [Int64: Set<Int64>], allocating counts: [String: Int]) async throws -> (known: [Int64: [Int64: TemporaryIdMapping]], ids: [String: [Int64]]) {
        guard let query = Self.mappingsQuery(wanted, allocating: counts) else { return ([:], [:]) }
        return try Self.mappings(from: try await fetch(query))
    }

    /// One statement for the devices' temporary ids among those asked and `counts` new ids
    /// per entity; nil when nothing is asked. Mappings carry their device (ids from 1); new
    /// ids come as device 0.
    static func mappingsQuery(_ wanted: [Int64: Set<Int64>], allocating counts: [String: Int]) -> PostgresQuery? {
        let (devices, temporary, entities, numbers) = arrays(wanted, allocating: counts)
        guard !devices.isEmpty || !entities.isEmpty else { return nil }
        return """
            SELECT t.device_id, t.temp_id, t.entity, t.id FROM unnest(\(devices)::bigint[], \(temporary)::bigint[]) AS u(device_id, temp_id)
            JOIN revsync_temp_ids AS t USING (device_id, temp_id)
            UNION ALL
            SELECT 0, 0, u.entity, nextval(pg_get_serial_sequence(quote_ident(u.entity), 'id'))
            FROM unnest(\(entities)::text[], \(numbers)::bigint[]) AS u(entity, n), generate_series(1, u.n)
            """
    }

    /// The parameters of a mappings lookup: device and temporary id pairs, then the entities
    /// that need new ids and how many each.
    private static func arrays(_ wanted: [Int64: Set<Int64>], allocating counts: [String: Int])
        -> (devices: [Int64], temporary: [Int64], entities: [String], numbers: [Int64])
    {
        var devices: [Int64] = [], temporary: [Int64] = []
        for (device, ids) in wanted {
            for id in ids {
                devices.append(device)
                temporary.append(id)
            }
        }
        let allocating = counts.filter { $0.value > 0 }.sorted { $0.key < $1.key }
        return (devices, temporary, allocating.map(\.key), allocating.map { Int64($0.value) })
    }

    static func mappings(from rows: [PostgresRow]) throws -> (known: [Int64: [Int64: TemporaryIdMapping]], ids: [String: [Int64]]) {
        var known: [Int64: [Int64: TemporaryIdMapping]] = [:]
        var ids: [String: [Int64]] = [:]
        for row in rows {
            let (device, temporaryId, entity, id) = try row.decode((Int64, Int64, String, Int64).self)
            if device == 0 {
                ids[entity, default: []].append(id)
            } else {
                known[device, default: [:]][temporaryId] = TemporaryIdMapping(entity: entity, id: id)
            }
        }
        return (known, ids.mapValues { $0.sorted() })
    }

    func storedOutcome(seq: Int64, device: Device) async throws -> StoredOutcome? {
        let rows = try await fetch(
            "SELECT revision, reason, change_set, digest FROM revsync_outcomes WHERE device_id = \(device.id) AND seq = \(seq)")
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
            let rows = try await fetch(
                """
                SELECT id, revision, rs_writer, rs_other_revision FROM \(unescaped: SQLIdentifier.quoted(entity))
                WHERE id = ANY(\(ids)) ORDER BY id FOR UPDATE
                """)
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
            let rows = try await fetch(
                "SELECT id FROM \(unescaped: SQLIdentifier.quoted(entity)) WHERE id = ANY(\(ids)) FOR KEY SHARE")
            for row in rows { found.insert(RecordKey(entity, try row.decode(Int64.self))) }
        }
        return found
    }

    func lockChildren(_ relation: Relation, parents: [Int64]) async throws -> [ApplyPlanner.Child] {
        let rows = try await fetch(
            """
            SELECT id, \(unescaped: SQLIdentifier.quoted(relation.attribute)), revision, rs_writer, rs_other_revision
            FROM \(unescaped: SQLIdentifier.quoted(relation.child))
            WHERE \(unescaped: SQLIdentifier.quoted(relation.attribute)) = ANY(\(parents)) ORDER BY id FOR UPDATE
            """)
        return try rows.map { row in
            let (child, parent, revision, writer, other) = try row.decode((Int64, Int64, Int64, Int64, Int64).self)
            return ApplyPlanner.Child(id: child, parent: parent, version: RecordVersion(revision: revision, writer: writer, otherRevision: other))
        }
    }

    // MARK: Writes

    func writeRecords(_ writes: [PlannedWrite]) async throws {
        var statement = BatchStatement()
        _ = addRecordWrites(writes, stampingFrom: nil, to: &statement)
        remember(writes, in: &statement)
        guard !statement.isEmpty else { return }
        do {
            try await execute(statement.query())
        } catch {
            throw Self.conflict(from: error) ?? error
        }
    }

    /// The records of `writes`, one part per entity and kind: the rules made sure no two
    /// change sets of them write the same record. With `head` (the part that took the
    /// revisions), each inserted or updated record gets its change set's revision as it is
    /// written; returns the keys so stamped.
    private func addRecordWrites(_ writes: [PlannedWrite], stampingFrom head: String?, to statement: inout BatchStatement) -> Set<RecordKey> {
        // k: the change set's place in the batch, from 1 (its revision is base + k).
        var inserts: [String: (names: [String], records: [RecordWrite], ks: [Int64])] = [:], insertOrder: [String] = []
        var updates: [String: (entity: String, names: [String], records: [RecordWrite], ks: [Int64])] = [:]
        var deletes: [String: [Int64]] = [:]
        var stamped: Set<RecordKey> = []
        for (offset, write) in writes.enumerated() {
            let k = Int64(offset + 1)
            for insert in write.plan.inserts {
                if inserts[insert.entity] == nil { insertOrder.append(insert.entity) }
                inserts[insert.entity, default: (insert.names, [], [])].records += insert.records
                inserts[insert.entity, default: (insert.names, [], [])].ks += Array(repeating: k, count: insert.records.count)
                if head != nil { for record in insert.records { stamped.insert(RecordKey(insert.entity, record.id)) } }
            }
            for update in write.plan.updates {
                let key = update.entity + "\u{0}" + update.names.joined(separator: ",")
                updates[key, default: (update.entity, update.names, [], [])].records += update.records
                updates[key, default: (update.entity, update.names, [], [])].ks += Array(repeating: k, count: update.records.count)
                if head != nil { for record in update.records { stamped.insert(RecordKey(update.entity, record.id)) } }
            }
            for delete in write.plan.deletes { deletes[delete.entity, default: []] += delete.ids }
        }
        let from = head.map { "\($0) AS h, " } ?? ""
        for entity in insertOrder {
            guard let insert = inserts[entity], let definition = schema.entity(named: entity), !insert.records.isEmpty else { continue }
            let recordset = RecordsetJSON(definition, names: insert.names, stamping: head != nil)
            let columns = insert.names.map(SQLIdentifier.quoted).joined(separator: ", ")
            let values = insert.names.map { "r." + SQLIdentifier.quoted($0) }.joined(separator: ", ")
            let revision = head == nil ? "0" : "h.base + r.rs_k"
            statement.add("""
                INSERT INTO \(SQLIdentifier.quoted(entity)) (id, revision, rs_writer, rs_other_revision, \(columns))
                SELECT r.id, \(revision), r.rs_writer, r.rs_other_revision, \(values)
                FROM \(from)jsonb_to_recordset(\(statement.bind(recordset.json(insert.records, ks: insert.ks)))::jsonb) AS r(\(recordset.columnDefinitions))
                """)
        }
        // Updates set the attributes and the write history the rules worked out.
        for key in updates.keys.sorted() {
            guard let update = updates[key], let definition = schema.entity(named: update.entity), !update.records.isEmpty else { continue }
            let recordset = RecordsetJSON(definition, names: update.names, stamping: head != nil)
            let assignments = (update.names.map { "\(SQLIdentifier.quoted($0)) = r.\(SQLIdentifier.quoted($0))" } + [
                "rs_writer = r.rs_writer", "rs_other_revision = r.rs_other_revision",
            ] + (head == nil ? [] : ["revision = h.base + r.rs_k"])).joined(separator: ", ")
            statement.add("""
                UPDATE \(SQLIdentifier.quoted(update.entity)) AS t SET \(assignments)
                FROM \(from)jsonb_to_recordset(\(statement.bind(recordset.json(update.records, ks: update.ks)))::jsonb) AS r(\(recordset.columnDefinitions))
                WHERE t.id = r.id
                """)
        }
        for (entity, ids) in deletes.sorted(by: { $0.key < $1.key }) {
            statement.add("DELETE FROM \(SQLIdentifier.quoted(entity)) WHERE id = ANY(\(statement.bind(ids))::bigint[])")
        }
        return stamped
    }

    func checkConstraints() async throws {
        do {
            try await execute("SET CONSTRAINTS ALL IMMEDIATE")
        } catch {
            throw Self.conflict(from: error) ?? error
        }
    }

    /// Remembers what each created temporary id became.
    private func remember(_ writes: [PlannedWrite], in statement: inout BatchStatement) {
        var devices: [Int64] = [], temporary: [Int64] = [], entities: [String] = [], permanent: [Int64] = [], seqs: [Int64] = []
        for write in writes {
            for created in write.plan.createdIds {
                devices.append(write.device.id)
                temporary.append(created.temporaryId)
                entities.append(created.entity)
                permanent.append(created.id)
                seqs.append(write.plan.seq ?? 0)
            }
        }
        guard !devices.isEmpty else { return }
        statement.add("""
            INSERT INTO revsync_temp_ids (device_id, temp_id, entity, id, seq)
            SELECT u.device_id, u.temp_id, u.entity, u.id, NULLIF(u.seq, 0)
            FROM unnest(\(statement.bind(devices))::bigint[], \(statement.bind(temporary))::bigint[], \(statement.bind(entities))::text[],
                \(statement.bind(permanent))::bigint[], \(statement.bind(seqs))::bigint[]) AS u(device_id, temp_id, entity, id, seq)
            """)
    }

    /// The rejections' outcomes, and each device's last seq. The change set itself is not kept:
    /// a retry must carry the same content (its digest), so the retry's own copy serves for the
    /// fresh corrective set. head_at lets the pruner drop it with the log.
    private func ledger(rejections: [PlannedRejection], lastSeqs: [Int64: Int64], mapping writes: [PlannedWrite], in statement: inout BatchStatement) throws {
        if !rejections.isEmpty {
            let encoder = JSONEncoder()
            let reasons = try rejections.map { String(decoding: try encoder.encode($0.reason), as: UTF8.self) }
            statement.add("""
                INSERT INTO revsync_outcomes (device_id, seq, reason, digest, head_at)
                SELECT u.device_id, u.seq, u.reason, decode(u.digest, 'hex'), (SELECT head FROM revsync_head)
                FROM unnest(\(statement.bind(rejections.map(\.device.id)))::bigint[], \(statement.bind(rejections.map(\.seq)))::bigint[],
                    \(statement.bind(reasons))::text[], \(statement.bind(rejections.map { Self.hex($0.digest) }))::text[]) AS u(device_id, seq, reason, digest)
                """)
        }
        // A device whose ids this batch maps gets a new row version even when its last seq
        // stays (-1: unchanged), so that a batch which waited for its row sees that it must read
        // the mappings again (`lockDevices(_:mappings:allocating:)`).
        var seqs = lastSeqs
        for write in writes where !write.plan.createdIds.isEmpty && seqs[write.device.id] == nil { seqs[write.device.id] = -1 }
        guard !seqs.isEmpty else { return }
        let devices = seqs.keys.sorted()
        statement.add("""
            UPDATE revsync_devices AS d SET last_seq = CASE WHEN u.seq < 0 THEN d.last_seq ELSE u.seq END
            FROM unnest(\(statement.bind(devices))::bigint[], \(statement.bind(devices.map { seqs[$0] ?? 0 }))::bigint[]) AS u(id, seq)
            WHERE d.id = u.id
            """)
    }

    /// Takes the next revisions and stamps them on every written record, the log entries and
    /// the seqs' outcomes, and writes the ledger, in one statement: the revision lock is held
    /// only from here to COMMIT.
    func stamp(_ writes: [PlannedWrite], rejections: [PlannedRejection], lastSeqs: [Int64: Int64]) async throws -> [CommittedEntry] {
        try await stamp(writes, rejections: rejections, lastSeqs: lastSeqs, writingRecords: false)
    }

    /// The records' writes and the stamp in one statement, one round trip fewer: each record
    /// is written with its revision. Unique values are then checked while the revision lock is
    /// held. Another transaction's uncommitted value was written under the lock too (an
    /// isolated run takes it before its writes, `lockRevisions`), so a wait for it ends at that
    /// transaction's COMMIT and cannot be a deadlock.
    func writeAndStamp(_ writes: [PlannedWrite], rejections: [PlannedRejection], lastSeqs: [Int64: Int64]) async throws -> [CommittedEntry] {
        try await stamp(writes, rejections: rejections, lastSeqs: lastSeqs, writingRecords: true)
    }

    private func stamp(_ writes: [PlannedWrite], rejections: [PlannedRejection], lastSeqs: [Int64: Int64], writingRecords: Bool) async throws -> [CommittedEntry] {
        var statement = BatchStatement()
        try ledger(rejections: rejections, lastSeqs: lastSeqs, mapping: writes, in: &statement)
        guard !writes.isEmpty else {
            if !statement.isEmpty { try await execute(statement.query()) }
            try await transaction.commit()
            return []
        }
        // The k-th change set of the batch (from 1) gets base + k.
        let count = statement.bind(Int64(writes.count))
        statement.add("UPDATE revsync_head SET head = head + \(count) WHERE singleton RETURNING head - \(count) AS base")
        let head = "w\(statement.partCount - 1)"
        var stamped: Set<RecordKey> = []
        if writingRecords {
            stamped = addRecordWrites(writes, stampingFrom: head, to: &statement)
            remember(writes, in: &statement)
        }
        // Records written before (or by no insert or update of theirs) get their revision here.
        var written: [String: (ids: [Int64], ks: [Int64])] = [:]
        for (offset, write) in writes.enumerated() {
            for key in write.plan.applied.writtenKeys where !stamped.contains(key) {
                written[key.entity, default: ([], [])].ids.append(key.id)
                written[key.entity, default: ([], [])].ks.append(Int64(offset + 1))
            }
        }
        for entity in written.keys.sorted() {
            guard let rows = written[entity] else { continue }
            statement.add("""
                UPDATE \(SQLIdentifier.quoted(entity)) AS t SET revision = h.base + u.k
                FROM \(head) AS h, unnest(\(statement.bind(rows.ids))::bigint[], \(statement.bind(rows.ks))::bigint[]) AS u(id, k) WHERE t.id = u.id
                """)
        }
        statement.add("""
            SELECT * FROM unnest(\(statement.bind(writes.map(\.device.id)))::bigint[], \(statement.bind(writes.map { $0.plan.seq ?? 0 }))::bigint[],
                \(statement.bind(writes.map { String(decoding: $0.plan.body, as: UTF8.self) }))::text[],
                \(statement.bind(writes.map { String(decoding: $0.plan.authorBody, as: UTF8.self) }))::text[],
                \(statement.bind(writes.map { Self.hex($0.digest) }))::text[]) WITH ORDINALITY AS u(device_id, seq, body, author_body, digest, k)
            """)
        let entries = "w\(statement.partCount - 1)"
        statement.add("""
            INSERT INTO revsync_outcomes (device_id, seq, revision, digest)
            SELECT e.device_id, e.seq, h.base + e.k, decode(e.digest, 'hex') FROM \(head) AS h, \(entries) AS e WHERE e.seq <> 0
            """)
        statement.add("""
            INSERT INTO revsync_log (revision, device_id, seq, body, author_body)
            SELECT h.base + e.k, e.device_id, NULLIF(e.seq, 0), replace(e.body, chr(1), (h.base + e.k)::text),
                replace(e.author_body, chr(1), (h.base + e.k)::text) FROM \(head) AS h, \(entries) AS e
            """)
        let rows: [PostgresRow]
        do {
            rows = try await fetch(statement.query(final: "SELECT base FROM \(head)"))
        } catch {
            // With the records written here, a value PostgreSQL refuses is a conflict, as in `writeRecords`.
            throw writingRecords ? Self.conflict(from: error) ?? error : error
        }
        guard let base = try rows.first?.decode(Int64.self) else {
            throw StoreError.inconsistent("stamping the revisions returned nothing: is revsync_head empty? run `revsync migrate`")
        }
        // Between the stamp and COMMIT, where a writer that let a later revision commit first would show.
        if let delay { await delay() }
        try await transaction.commit()
        // The same substitution PostgreSQL made, so caches get the stored bytes without reading them back.
        return writes.enumerated().map { offset, write in
            let revision = base + Int64(offset + 1)
            return CommittedEntry(
                revision: revision, deviceId: write.device.id,
                body: ByteBuffer(bytes: LogEntryEncoder.substitute(write.plan.body, revision: revision)),
                authorBody: ByteBuffer(bytes: LogEntryEncoder.substitute(write.plan.authorBody, revision: revision)))
        }
    }

    /// The head row, as `stamp`'s UPDATE would lock it.
    func lockRevisions() async throws {
        try await execute("SELECT head FROM revsync_head WHERE singleton FOR NO KEY UPDATE")
    }

    /// Each change set written on its own begins with its foreign keys deferred again, so its
    /// creates may come in any order.
    func savepoint() async throws {
        try await execute("SET CONSTRAINTS ALL DEFERRED")
        try await execute("SAVEPOINT change_set")
    }

    func rollbackToSavepoint() async throws {
        try await execute("ROLLBACK TO SAVEPOINT change_set")
    }

    /// A statement's rows, once BEGIN is known to have opened the transaction it ran in.
    private func fetch(_ query: PostgresQuery) async throws -> [PostgresRow] {
        let rows = try await connection.preparedRows(query, self.logger)
        try await transaction.checkOpened()
        return rows
    }

    private func execute(_ query: PostgresQuery) async throws {
        _ = try await fetch(query)
    }

    private static func hex(_ bytes: [UInt8]) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count * 2)
        for byte in bytes {
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 0x0f)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// A constraint PostgreSQL enforced as a safety net, as the conflict it means.
    static func conflict(from error: any Error) -> ConflictReason? {
        if let reason = error as? ConflictReason { return reason }
        guard let error = error as? PSQLError, let state = error.sqlState else { return nil }
        return ConflictRules.enforcedByDatabase(
            sqlState: state, table: error.serverInfo?[.tableName], detail: error.serverInfo?[.detail] ?? error.serverInfo?[.message] ?? "",
            message: error.serverInfo?[.message])
    }
}
