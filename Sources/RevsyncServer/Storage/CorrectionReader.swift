import PostgresNIO
import RevsyncRules
import RevsyncWire

/// Builds a corrective set from the server's current state, read in one consistent snapshot.
struct CorrectionReader: Sendable {
    let database: Database
    let schema: DatasetSchema

    /// A repair that would pass its byte limit: reading stops there.
    private struct RepairTooLarge: Error {}

    /// The corrective set for a rejected change set, or, when the repair would be larger than
    /// `maxBytes`, the instruction to drop it and re-bootstrap (`CorrectiveSet.resync`). Reading
    /// stops as soon as the limit is passed, so memory stays bounded whatever the cascade.
    func corrective(for changeSet: ChangeSet, reason: ConflictReason, device: Device, maxBytes: Int = .max) async throws -> [UInt8] {
        do {
            return try await boundedCorrective(for: changeSet, reason: reason, device: device, maxBytes: maxBytes)
        } catch is RepairTooLarge {
            return CorrectiveSet.resync(seq: changeSet.seq, reason: reason, limit: maxBytes)
        }
    }

    private func boundedCorrective(for changeSet: ChangeSet, reason: ConflictReason, device: Device, maxBytes: Int) async throws -> [UInt8] {
        let logger = database.logger
        let schema = self.schema
        let reader = RecordReader(schema: schema, logger: logger)
        let scope = CorrectionScope(of: changeSet, schema: schema)
        let set = try await database.transaction("REPEATABLE READ READ ONLY") { connection in
            var corrective = CorrectiveSet(seq: changeSet.seq, reason: reason)
            let temporary = (scope.records + scope.created).map(\.id).filter { $0 < 0 }
            var known: [Int64: TemporaryIdMapping] = [:]
            if !temporary.isEmpty {
                for row in try await connection.rows(
                    "SELECT temp_id, entity, id FROM revsync_temp_ids WHERE device_id = \(device.id) AND temp_id = ANY(\(temporary))", logger)
                {
                    let (temporaryId, entity, id) = try row.decode((Int64, String, Int64).self)
                    known[temporaryId] = TemporaryIdMapping(entity: entity, id: id)
                }
            }
            // Each key as the device knows it, with the permanent id to look up (if any).
            var wanted: [(sent: RecordKey, permanent: Int64?)] = []
            for key in scope.created + scope.records {
                if key.id > 0 {
                    wanted.append((key, key.id))
                } else if let mapping = known[key.id], mapping.entity == key.entity {
                    wanted.append((key, mapping.id))
                } else {
                    wanted.append((key, nil))
                }
            }
            var found: [RecordKey: StoredRecord] = [:]
            let lookups = Dictionary(grouping: wanted.compactMap { item in item.permanent.map { RecordKey(item.sent.entity, $0) } }, by: \.entity)
            for (entity, keys) in lookups.sorted(by: { $0.key < $1.key }) {
                for record in try await reader.records(entity, ids: keys.map(\.id), on: connection) {
                    found[RecordKey(entity, record.id)] = record
                }
            }
            for (sent, permanent) in wanted {
                if let permanent, let record = found[RecordKey(sent.entity, permanent)] {
                    corrective.keep(sent.entity, record, temporaryId: sent.id < 0 ? sent.id : nil)
                } else {
                    corrective.drop(sent.entity, sent.id)
                }
            }
            if corrective.approximateBytes > maxBytes { throw RepairTooLarge() }
            // Records depending on what the set tried to delete: the device may have
            // removed (cascade) or changed (set null) them locally.
            var frontier = Dictionary(grouping: wanted.filter { item in scope.deletedRoots.contains(item.sent) }.compactMap { item in
                item.permanent.map { RecordKey(item.sent.entity, $0) }
            }, by: \.entity).mapValues { $0.map(\.id) }
            var visited: Set<RecordKey> = []
            while !frontier.isEmpty {
                var next: [String: [Int64]] = [:]
                for (parent, ids) in frontier.sorted(by: { $0.key < $1.key }) {
                    for relation in schema.references(to: parent) {
                        // No record takes fewer than 48 bytes: more rows than that cannot fit.
                        let room = (maxBytes - corrective.approximateBytes) / 48 + 1
                        for record in try await reader.records(relation.child, where: relation.attribute, in: ids, limit: room, on: connection) {
                            let key = RecordKey(relation.child, record.id)
                            guard visited.insert(key).inserted else { continue }
                            corrective.keep(relation.child, record, temporaryId: nil)
                            if corrective.approximateBytes > maxBytes { throw RepairTooLarge() }
                            if relation.rule == .cascade { next[relation.child, default: []].append(record.id) }
                        }
                    }
                }
                frontier = next
            }
            return corrective
        }
        return set.encoded(schema: schema)
    }

    /// An acknowledgement rebuilt for a seq whose log entry was pruned: the records it
    /// created, as they are now, each with its `__oldId__`; those deleted since are under
    /// `delete` (with `__oldId__`, so the device can drop its temporary copy).
    func rebuiltAcknowledgement(seq: Int64, revision: Int64, device: Device) async throws -> [UInt8] {
        let logger = database.logger
        let schema = self.schema
        let reader = RecordReader(schema: schema, logger: logger)
        return try await database.transaction("REPEATABLE READ READ ONLY") { connection in
            var created: [String: [(temporary: Int64, id: Int64)]] = [:]
            var types: [String] = []
            for row in try await connection.rows(
                "SELECT entity, temp_id, id FROM revsync_temp_ids WHERE device_id = \(device.id) AND seq = \(seq) ORDER BY temp_id DESC", logger)
            {
                let (entity, temporary, id) = try row.decode((String, Int64, Int64).self)
                if created[entity] == nil { types.append(entity) }
                created[entity, default: []].append((temporary, id))
            }
            var out = JSONWriter(capacity: 512)
            out.raw("{\"conflict\":false,\"revision\":")
            out.integer(revision)
            out.raw(",\"seq\":")
            out.integer(seq)
            out.raw(",\"types\":")
            out.stringArray(types)
            for entity in types {
                let pairs = created[entity] ?? []
                let existing = Dictionary(uniqueKeysWithValues: try await reader.records(entity, ids: pairs.map(\.id), on: connection).map { ($0.id, $0) })
                let order = schema.entity(named: entity)?.attributes.map(\.name) ?? []
                out.byte(UInt8(ascii: ","))
                out.key(entity)
                out.raw("{\"create\":")
                out.integerArray(pairs.filter { existing[$0.id] != nil }.map(\.id))
                out.raw(",\"update\":[],\"delete\":")
                out.integerArray(pairs.filter { existing[$0.id] == nil }.map(\.id))
                out.raw(",\"attributes\":{")
                for (index, pair) in pairs.enumerated() {
                    if index > 0 { out.byte(UInt8(ascii: ",")) }
                    out.byte(UInt8(ascii: "\""))
                    out.integer(pair.id)
                    out.raw("\":{\"__oldId__\":")
                    out.integer(pair.temporary)
                    if let record = existing[pair.id] {
                        out.raw(",\"revision\":")
                        out.integer(record.revision)
                        for name in order {
                            out.byte(UInt8(ascii: ","))
                            out.key(name)
                            out.value(record.values[name] ?? .null)
                        }
                    }
                    out.byte(UInt8(ascii: "}"))
                }
                out.raw("}}")
            }
            out.byte(UInt8(ascii: "}"))
            return out.bytes
        }
    }
}
