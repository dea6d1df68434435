import Logging
import NIOCore
import PostgresNIO
import RevsyncRules
import RevsyncWire

/// The statements of one change set inside its transaction, from resolving
/// temporary ids to stamping the revision. Throws `ConflictReason` to reject.
struct ChangeSetWriter: Sendable {
    let schema: DatasetSchema
    let device: Device
    let logger: Logger
    /// A log entry larger than this (cascades included) rejects the change set.
    let maxLogEntryBytes: Int
    let delayBeforeRevision: ApplyDelay?

    /// - Parameters:
    ///   - known: the device's map for every temporary id the set uses or creates.
    ///   - digest: the change set's content digest, kept with its seq's outcome.
    func write(
        _ normalized: NormalizedChangeSet, known: [Int64: TemporaryIdMapping], digest: [UInt8], on connection: PostgresConnection
    ) async throws -> CommittedEntry {
        var resolved = try TemporaryIdResolver.resolve(normalized, schema: schema, known: known).get()

        // Lock what is updated or deleted, in one global order so writers do not deadlock.
        var versions: [RecordKey: RecordVersion] = [:]
        let touched = Dictionary(grouping: resolved.updates.map { RecordKey($0.entity, $0.id) } + resolved.deletes.map { RecordKey($0.entity, $0.id) }, by: \.entity)
        for entity in touched.keys.sorted() {
            let ids = Array(Set(touched[entity, default: []].map(\.id))).sorted()
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
        for update in resolved.updates {
            let key = RecordKey(update.entity, update.id)
            if let reason = ConflictRules.check(key, basis: update.basis, version: versions[key], device: device.id, operation: "update") { throw reason }
        }
        for delete in resolved.deletes {
            let key = RecordKey(delete.entity, delete.id)
            if let reason = ConflictRules.check(key, basis: delete.basis, version: versions[key], device: device.id, operation: "delete") { throw reason }
        }
        try await checkReferencedRecordsExist(resolved.referencedRecords, on: connection)

        var applied = AppliedChangeSet(seq: resolved.seq, types: resolved.types)
        let permanentIds = try await allocateIds(for: resolved.creates, on: connection)
        resolved.rewriteCreatedReferences(permanentIds, schema: schema)
        try await insert(resolved.creates, permanentIds: permanentIds, into: &applied, on: connection)
        try await update(resolved.updates, into: &applied, on: connection)
        try await delete(resolved.deletes, into: &applied, on: connection)
        try await remember(resolved.creates, permanentIds: permanentIds, seq: resolved.seq, on: connection)
        // Foreign keys are deferred so creates may come in any order; check them now,
        // before the revision lock, so a violation rejects this change set alone.
        try await connection.run("SET CONSTRAINTS ALL IMMEDIATE", logger)
        if let seq = resolved.seq {
            try await connection.run("UPDATE revsync_devices SET last_seq = \(seq) WHERE id = \(device.id)", logger)
        }
        if let delayBeforeRevision { await delayBeforeRevision() }
        return try await stamp(applied, digest: digest, on: connection)
    }

    private func checkReferencedRecordsExist(_ keys: Set<RecordKey>, on connection: PostgresConnection) async throws {
        for (entity, group) in Dictionary(grouping: keys, by: \.entity).sorted(by: { $0.key < $1.key }) {
            let ids = group.map(\.id).sorted()
            // KEY SHARE keeps them from being deleted until this change set commits.
            let rows = try await connection.rows(
                "SELECT id FROM \(unescaped: SQLIdentifier.quoted(entity)) WHERE id = ANY(\(ids)) FOR KEY SHARE", logger)
            let found = Set(try rows.map { try $0.decode(Int64.self) })
            if let missing = ids.first(where: { !found.contains($0) }) {
                throw ConflictReason(code: .reference, entity: entity, id: missing, message: "\(entity) \(missing) does not exist (it is referenced by this change set)")
            }
        }
    }

    private func allocateIds(for creates: [CreateOperation], on connection: PostgresConnection) async throws -> [Int64: Int64] {
        var permanent: [Int64: Int64] = [:]
        for (entity, group) in Dictionary(grouping: creates, by: \.entity).sorted(by: { $0.key < $1.key }) {
            let rows = try await connection.rows(
                "SELECT nextval(pg_get_serial_sequence(\(SQLIdentifier.quoted(entity)), 'id')) FROM generate_series(1, \(group.count))", logger)
            let ids = try rows.map { try $0.decode(Int64.self) }.sorted()
            for (create, id) in zip(group, ids) { permanent[create.temporaryId] = id }
        }
        return permanent
    }

    private func insert(_ creates: [CreateOperation], permanentIds: [Int64: Int64], into applied: inout AppliedChangeSet, on connection: PostgresConnection) async throws {
        for entity in Self.orderedEntities(creates.map(\.entity)) {
            guard let definition = schema.entity(named: entity) else { continue }
            let group = creates.filter { $0.entity == entity }
            var records: [(Int64, Attributes)] = []
            for create in group {
                guard let id = permanentIds[create.temporaryId] else { continue }
                records.append((id, create.values))
                applied.create(entity, CreatedRecord(id: id, temporaryId: create.temporaryId, values: create.values))
            }
            let names = definition.attributes.map(\.name)
            let recordset = RecordsetJSON(definition, names: names)
            let columns = names.map(SQLIdentifier.quoted).joined(separator: ", ")
            let values = names.map { "r." + SQLIdentifier.quoted($0) }.joined(separator: ", ")
            try await connection.run(
                """
                INSERT INTO \(unescaped: SQLIdentifier.quoted(entity)) (id, revision, rs_writer, rs_other_revision, \(unescaped: columns))
                SELECT r.id, 0, \(device.id), 0, \(unescaped: values) FROM jsonb_to_recordset(\(recordset.json(records))::jsonb) AS r(\(unescaped: recordset.columnDefinitions))
                """, logger)
        }
    }

    private func update(_ updates: [UpdateOperation], into applied: inout AppliedChangeSet, on connection: PostgresConnection) async throws {
        // Records changing the same attributes share one statement.
        let groups = Dictionary(grouping: updates) { $0.entity + "\u{0}" + $0.values.keys.sorted().joined(separator: ",") }
        for key in groups.keys.sorted() {
            guard let group = groups[key], let first = group.first, let definition = schema.entity(named: first.entity) else { continue }
            for update in group { applied.update(update.entity, id: update.id, values: update.values) }
            let names = first.values.keys.sorted()
            try await writeAttributes(definition, names: names, records: group.map { ($0.id, $0.values) }, on: connection)
        }
    }

    /// Sets `names` on existing records and moves their write history to this device.
    private func writeAttributes(_ definition: Entity, names: [String], records: [(Int64, Attributes)], on connection: PostgresConnection) async throws {
        let recordset = RecordsetJSON(definition, names: names)
        let assignments = (names.map { "\(SQLIdentifier.quoted($0)) = r.\(SQLIdentifier.quoted($0))" } + [
            "rs_other_revision = CASE WHEN t.rs_writer = \(device.id) THEN t.rs_other_revision ELSE t.revision END",
            "rs_writer = \(device.id)",
        ]).joined(separator: ", ")
        try await connection.run(
            """
            UPDATE \(unescaped: SQLIdentifier.quoted(definition.name)) AS t SET \(unescaped: assignments)
            FROM jsonb_to_recordset(\(recordset.json(records))::jsonb) AS r(\(unescaped: recordset.columnDefinitions))
            WHERE t.id = r.id
            """, logger)
    }

    private func delete(_ deletes: [DeleteOperation], into applied: inout AppliedChangeSet, on connection: PostgresConnection) async throws {
        guard !deletes.isEmpty else { return }
        var plan = DeletePlan(roots: deletes.map { RecordKey($0.entity, $0.id) })
        while true {
            let frontier = plan.takeFrontier()
            if frontier.isEmpty { break }
            for (parent, ids) in frontier.sorted(by: { $0.key < $1.key }) {
                for relation in schema.references(to: parent) {
                    let rows = try await connection.rows(
                        """
                        SELECT id, \(unescaped: SQLIdentifier.quoted(relation.attribute)) FROM \(unescaped: SQLIdentifier.quoted(relation.child))
                        WHERE \(unescaped: SQLIdentifier.quoted(relation.attribute)) = ANY(\(ids)) ORDER BY id FOR UPDATE
                        """, logger)
                    let children = try rows.map { row -> (child: Int64, parent: Int64) in
                        let (child, parentId) = try row.decode((Int64, Int64).self)
                        return (child, parentId)
                    }
                    let permissions = schema.entity(named: relation.child)?.permissions(for: device.role) ?? .none
                    try plan.addDependents(relation, parentEntity: parent, children: children, permissions: permissions)
                }
            }
        }
        let clears = try plan.finish().get()
        for (record, attributes) in clears {
            guard let definition = schema.entity(named: record.entity) else { continue }
            let values = Dictionary(uniqueKeysWithValues: attributes.map { ($0, JSONValue.null) })
            applied.update(record.entity, id: record.id, values: values)
            try await writeAttributes(definition, names: attributes.sorted(), records: [(record.id, values)], on: connection)
        }
        for (entity, keys) in Dictionary(grouping: plan.deleted, by: \.entity).sorted(by: { $0.key < $1.key }) {
            let ids = keys.map(\.id)
            for id in ids { applied.delete(entity, id: id) }
            try await connection.run("DELETE FROM \(unescaped: SQLIdentifier.quoted(entity)) WHERE id = ANY(\(ids))", logger)
        }
    }

    private func remember(_ creates: [CreateOperation], permanentIds: [Int64: Int64], seq: Int64?, on connection: PostgresConnection) async throws {
        guard !creates.isEmpty else { return }
        let temporary = creates.map(\.temporaryId)
        let entities = creates.map(\.entity)
        let permanent = creates.map { permanentIds[$0.temporaryId] ?? 0 }
        try await connection.run(
            """
            INSERT INTO revsync_temp_ids (device_id, temp_id, entity, id, seq)
            SELECT \(device.id), u.temp_id, u.entity, u.id, \(seq) FROM unnest(\(temporary)::bigint[], \(entities)::text[], \(permanent)::bigint[]) AS u(temp_id, entity, id)
            """, logger)
    }

    /// Takes the next revision and stamps it on every written record and on the log
    /// entry, in one statement: the revision lock is held only from here to COMMIT.
    private func stamp(_ applied: AppliedChangeSet, digest: [UInt8], on connection: PostgresConnection) async throws -> CommittedEntry {
        let bodyBytes = LogEntryEncoder.encode(applied, schema: schema, author: false)
        let authorBytes = LogEntryEncoder.encode(applied, schema: schema, author: true)
        // Every device must swallow this entry whole: refuse it before it takes a revision.
        guard authorBytes.count <= maxLogEntryBytes else {
            throw ConflictReason(
                code: .invalid, entity: nil, id: nil,
                message: "the change set would write \(authorBytes.count) bytes to the log (its cascades included); the limit is \(maxLogEntryBytes): split it")
        }
        let body = String(decoding: bodyBytes, as: UTF8.self)
        let authorBody = String(decoding: authorBytes, as: UTF8.self)
        var binds = PostgresBindings()
        binds.append(device.id)
        binds.append(applied.seq)
        binds.append(body)
        binds.append(authorBody)
        binds.append(ByteBuffer(bytes: digest))
        var sql = "WITH h AS (UPDATE revsync_head SET head = head + 1 WHERE singleton RETURNING head)"
        let written = Dictionary(grouping: applied.writtenKeys, by: \.entity)
        for (index, entity) in written.keys.sorted().enumerated() {
            binds.append(written[entity, default: []].map(\.id))
            sql += ", s\(index) AS (UPDATE \(SQLIdentifier.quoted(entity)) SET revision = (SELECT head FROM h) WHERE id = ANY($\(binds.count)::bigint[]))"
        }
        if applied.seq != nil {
            sql += ", o AS (INSERT INTO revsync_outcomes (device_id, seq, revision, digest) SELECT $1, $2, head, $5 FROM h)"
        }
        sql += """
             INSERT INTO revsync_log (revision, device_id, seq, body, author_body)
            SELECT head, $1, $2, replace($3, chr(1), head::text), replace($4, chr(1), head::text) FROM h RETURNING revision
            """
        let rows = try await connection.rows(PostgresQuery(unsafeSQL: sql, binds: binds), logger)
        guard let revision = try rows.first?.decode(Int64.self) else {
            throw SyncError(.internal, "stamping the revision returned nothing")
        }
        // The same substitution PostgreSQL made, so caches get the stored bytes without reading them back.
        return CommittedEntry(
            revision: revision, deviceId: device.id,
            body: Self.substitute(bodyBytes, revision), authorBody: Self.substitute(authorBytes, revision))
    }

    static func substitute(_ bytes: [UInt8], _ revision: Int64) -> ByteBuffer {
        let number = Array(String(revision).utf8)
        var buffer = ByteBufferAllocator().buffer(capacity: bytes.count + 8 * number.count)
        var start = 0
        for (index, byte) in bytes.enumerated() where byte == JSONWriter.placeholder {
            buffer.writeBytes(bytes[start..<index])
            buffer.writeBytes(number)
            start = index + 1
        }
        buffer.writeBytes(bytes[start...])
        return buffer
    }

    /// Entities in first-appearance order.
    private static func orderedEntities(_ names: [String]) -> [String] {
        var seen: Set<String> = []
        return names.filter { seen.insert($0).inserted }
    }
}

extension ResolvedChangeSet {
    /// Replaces references to records created in this set with their new permanent ids.
    mutating func rewriteCreatedReferences(_ permanentIds: [Int64: Int64], schema: DatasetSchema) {
        func rewrite(_ values: inout Attributes, entity: String) {
            for attribute in schema.entity(named: entity)?.attributes ?? [] where attribute.references != nil {
                if case .integer(let id)? = values[attribute.name], id < 0, let permanent = permanentIds[id] {
                    values[attribute.name] = .integer(permanent)
                }
            }
        }
        for index in creates.indices { rewrite(&creates[index].values, entity: creates[index].entity) }
        for index in updates.indices { rewrite(&updates[index].values, entity: updates[index].entity) }
    }
}
