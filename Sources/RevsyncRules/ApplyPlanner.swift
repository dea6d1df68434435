import RevsyncWire

/// The decisions of applying one change set, taken on the facts storage loaded with
/// its locks: which records to lock, whether the set conflicts, which records depend on
/// what it deletes, and what exactly it writes. Storage only loads and writes.
public enum ApplyPlanner {
    /// A stored record found referencing a parent, with its write history.
    public struct Child: Sendable, Hashable {
        public let id: Int64
        public let parent: Int64
        public let version: RecordVersion

        public init(id: Int64, parent: Int64, version: RecordVersion) {
            self.id = id
            self.parent = parent
            self.version = version
        }
    }

    /// The records the set updates or deletes, to lock in this one global order so writers do not deadlock.
    public static func lockTargets(_ resolved: ResolvedChangeSet) -> [RecordKey] {
        Set(resolved.updates.map { RecordKey($0.entity, $0.id) } + resolved.deletes.map { RecordKey($0.entity, $0.id) }).sorted()
    }

    /// The conflict rule over the locked versions of the records the set updates and deletes.
    public static func conflict(_ resolved: ResolvedChangeSet, versions: [RecordKey: RecordVersion], device: Int64) -> ConflictReason? {
        for update in resolved.updates {
            let key = RecordKey(update.entity, update.id)
            if let reason = ConflictRules.check(key, basis: update.basis, version: versions[key], device: device, operation: "update") { return reason }
        }
        for delete in resolved.deletes {
            let key = RecordKey(delete.entity, delete.id)
            if let reason = ConflictRules.check(key, basis: delete.basis, version: versions[key], device: device, operation: "delete") { return reason }
        }
        return nil
    }

    /// The first referenced record that does not exist, by entity and id.
    public static func missingReference(_ resolved: ResolvedChangeSet, existing: Set<RecordKey>) -> ConflictReason? {
        guard let missing = resolved.referencedRecords.sorted().first(where: { !existing.contains($0) }) else { return nil }
        return ConflictReason(
            code: .reference, entity: missing.entity, id: missing.id,
            message: "\(missing.entity) \(missing.id) does not exist (it is referenced by this change set)")
    }

    /// The records referencing `parents` through `relation` as they are once the set's own creates
    /// and updates are written: the stored children, moved or joined by what the set writes.
    /// - Parameter resolved: with references to created records rewritten to their permanent ids.
    public static func dependents(
        _ relation: Relation, parents: [Int64], stored: [Child], resolved: ResolvedChangeSet, permanentIds: [Int64: Int64]
    ) -> [(child: Int64, parent: Int64)] {
        let parentSet = Set(parents)
        var children = Dictionary(stored.map { ($0.id, $0.parent) }, uniquingKeysWith: { first, _ in first })
        /// nil: the values do not set the reference; .some(nil): they clear it.
        func reference(_ values: Attributes) -> Int64?? {
            guard let value = values[relation.attribute] else { return .none }
            if case .integer(let id) = value { return .some(id) }
            return .some(nil)
        }
        for update in resolved.updates where update.entity == relation.child {
            guard case .some(let target) = reference(update.values) else { continue }
            children[update.id] = target.flatMap { parentSet.contains($0) ? $0 : nil }
        }
        for create in resolved.creates where create.entity == relation.child {
            guard case .some(.some(let target)) = reference(create.values), parentSet.contains(target),
                let id = permanentIds[create.temporaryId]
            else { continue }
            children[id] = target
        }
        return children.sorted { $0.key < $1.key }.map { (child: $0.key, parent: $0.value) }
    }

    /// What an accepted set writes, in the order storage writes it, and its log entry; or the
    /// rejection of a log entry larger than `maxLogEntryBytes`, which every device would have to swallow whole.
    /// - Parameters:
    ///   - resolved: with references to created records rewritten to their permanent ids.
    ///   - versions: the locked versions of updated records and of children found by the delete walk.
    public static func plan(
        _ resolved: ResolvedChangeSet, permanentIds: [Int64: Int64], deletes: DeletePlan, clears: [(record: RecordKey, attributes: [String])],
        versions: [RecordKey: RecordVersion], device: Int64, schema: DatasetSchema, maxLogEntryBytes: Int
    ) -> Result<WritePlan, ConflictReason> {
        var plan = WritePlan(seq: resolved.seq, types: resolved.types)
        var history = versions

        for entity in firstAppearance(resolved.creates.map(\.entity)) {
            guard let definition = schema.entity(named: entity) else { continue }
            var records: [RecordWrite] = []
            for create in resolved.creates where create.entity == entity {
                guard let id = permanentIds[create.temporaryId] else { continue }
                records.append(RecordWrite(id: id, values: create.values, writer: device, otherRevision: 0))
                history[RecordKey(entity, id)] = .created(by: device, at: 0)
                plan.applied.create(entity, CreatedRecord(id: id, temporaryId: create.temporaryId, values: create.values))
                plan.createdIds.append(CreatedId(temporaryId: create.temporaryId, entity: entity, id: id))
            }
            plan.inserts.append(AttributeWrite(entity: entity, names: definition.attributes.map(\.name), records: records))
        }

        func write(_ entity: String, _ id: Int64, _ values: Attributes) -> RecordWrite {
            let key = RecordKey(entity, id)
            let before = history[key] ?? RecordVersion(revision: 0, writer: device, otherRevision: 0)
            let after = before.written(by: device, at: before.revision)
            history[key] = after
            plan.applied.update(entity, id: id, values: values)
            return RecordWrite(id: id, values: values, writer: after.writer, otherRevision: after.otherRevision)
        }
        // Records changing the same attributes share one statement.
        let groups = Dictionary(grouping: resolved.updates) { $0.entity + "\u{0}" + $0.values.keys.sorted().joined(separator: ",") }
        for key in groups.keys.sorted() {
            guard let group = groups[key], let first = group.first else { continue }
            let records = group.map { write($0.entity, $0.id, $0.values) }
            plan.updates.append(AttributeWrite(entity: first.entity, names: first.values.keys.sorted(), records: records))
        }
        for (record, attributes) in clears {
            let values = Dictionary(uniqueKeysWithValues: attributes.map { ($0, JSONValue.null) })
            plan.updates.append(AttributeWrite(entity: record.entity, names: attributes.sorted(), records: [write(record.entity, record.id, values)]))
        }
        for (entity, keys) in Dictionary(grouping: deletes.deleted, by: \.entity).sorted(by: { $0.key < $1.key }) {
            let ids = keys.map(\.id)
            for id in ids { plan.applied.delete(entity, id: id) }
            plan.deletes.append(RecordDeletes(entity: entity, ids: ids))
        }

        plan.body = LogEntryEncoder.encode(plan.applied, schema: schema, author: false)
        plan.authorBody = LogEntryEncoder.encode(plan.applied, schema: schema, author: true)
        guard plan.authorBody.count <= maxLogEntryBytes else {
            return .failure(ConflictReason(
                code: .invalid, entity: nil, id: nil,
                message: "the change set would write \(plan.authorBody.count) bytes to the log (its cascades included); the limit is \(maxLogEntryBytes): split it"))
        }
        return .success(plan)
    }

    private static func firstAppearance(_ names: [String]) -> [String] {
        var seen: Set<String> = []
        return names.filter { seen.insert($0).inserted }
    }
}

extension ResolvedChangeSet {
    /// Replaces references to records created in this set with their new permanent ids.
    public mutating func rewriteCreatedReferences(_ permanentIds: [Int64: Int64], schema: DatasetSchema) {
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

extension LogEntryEncoder {
    /// The stored bytes of an entry: `bytes` with its revision placeholders replaced by `revision`,
    /// exactly as PostgreSQL's `replace` writes them.
    public static func substitute(_ bytes: [UInt8], revision: Int64) -> [UInt8] {
        let number = Array(String(revision).utf8)
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count + 8 * number.count)
        var start = 0
        for (index, byte) in bytes.enumerated() where byte == JSONWriter.placeholder {
            out += bytes[start..<index]
            out += number
            start = index + 1
        }
        out += bytes[start...]
        return out
    }
}
