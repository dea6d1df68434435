import RevsyncWire

/// Writes to a `RecordStore` on behalf of the rules, noting which records changed
/// and applying the schema's on-delete rules where a local delete needs them.
struct StoreEditor {
    /// A side effect of a local delete on a record that references a deleted one.
    enum DeleteEffect {
        case cascaded(RecordKey)
        case nulled(RecordKey, attribute: String)
    }

    let store: any RecordStore
    let schema: LocalSchema
    private(set) var changes = RecordChanges()

    init(store: any RecordStore, schema: LocalSchema) {
        self.store = store
        self.schema = schema
    }

    mutating func put(_ entity: String, _ record: DeviceRecord) throws {
        try store.put(entity, record)
        changes.noteUpsert(entity, record.id)
    }

    @discardableResult
    mutating func remove(_ entity: String, id: Int64) throws -> Bool {
        let removed = try store.remove(entity, id: id)
        if removed { changes.noteDelete(entity, id) }
        return removed
    }

    /// Removes a record the way the server will delete it: cascading to records
    /// that reference it with `cascade` and clearing `set null` references, level
    /// by level. `restrict` references are left for the caller to check.
    /// `effect` sees each dependent record before it is changed and may throw to refuse.
    /// Dependents are handled even when the record itself is already gone: a
    /// replayed pending delete also removes children that arrived since.
    mutating func delete(_ entity: String, id: Int64, effect: (DeleteEffect) throws -> Void = { _ in }) throws {
        try remove(entity, id: id)
        var frontier = [RecordKey(entity, id)]
        var deleted: Set<RecordKey> = [RecordKey(entity, id)]
        while !frontier.isEmpty {
            var next: [RecordKey] = []
            for parent in frontier {
                for relation in schema.relations(to: parent.entity) {
                    for childId in try store.ids(relation.child, where: relation.attribute, equals: parent.id) {
                        let child = RecordKey(relation.child, childId)
                        switch relation.rule {
                        case .cascade:
                            guard deleted.insert(child).inserted else { continue }
                            try effect(.cascaded(child))
                            try remove(child.entity, id: child.id)
                            next.append(child)
                        case .setNull:
                            guard var record = try store.record(child.entity, id: child.id) else { continue }
                            try effect(.nulled(child, attribute: relation.attribute))
                            record.attributes[relation.attribute] = .null
                            try put(child.entity, record)
                        case .restrict:
                            continue
                        }
                    }
                }
            }
            frontier = next
        }
    }

    /// Points every stored reference to `entity` `old` at `new` instead.
    mutating func replaceReferences(to entity: String, from old: Int64, to new: Int64) throws {
        for relation in schema.relations(to: entity) {
            for childId in try store.ids(relation.child, where: relation.attribute, equals: old) {
                guard var record = try store.record(relation.child, id: childId) else { continue }
                record.attributes[relation.attribute] = .integer(new)
                try put(relation.child, record)
            }
        }
    }
}
