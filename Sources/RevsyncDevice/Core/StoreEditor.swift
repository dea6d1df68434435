import RevsyncRules
import RevsyncWire

/// Writes to a `RecordStore` on behalf of the rules, noting which records changed
/// and applying the schema's on-delete rules where a local delete needs them.
struct StoreEditor {
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

    /// Removes a record the way the server will delete it: by the shared on-delete
    /// walk (`DeletePlan`), cascading to records that reference it with `cascade`
    /// and clearing `set null` references. `restrict` references are left for the
    /// caller to check. A cascade into an entity whose `permissions` forbid
    /// deleting throws the plan's `forbidden` `ConflictReason` before anything changes.
    /// Dependents are handled even when the record itself is already gone: a
    /// replayed pending delete also removes children that arrived since.
    /// - Returns: the records deleted by cascade.
    @discardableResult
    mutating func delete(_ entity: String, id: Int64, permissions: (_ entity: String) -> Permissions = { _ in .all }) throws -> [RecordKey] {
        let store = self.store, schema = self.schema
        var plan = DeletePlan(roots: [RecordKey(entity, id)])
        try plan.complete(relations: schema.relations(to:), permissions: permissions) { relation, parentIds in
            try parentIds.flatMap { parent in
                try store.ids(relation.child, where: relation.attribute, equals: parent).map { (child: $0, parent: parent) }
            }
        }
        for key in plan.deleted { try remove(key.entity, id: key.id) }
        for (key, attributes) in plan.clears {
            guard var record = try store.record(key.entity, id: key.id) else { continue }
            for attribute in attributes { record.attributes[attribute] = .null }
            try put(key.entity, record)
        }
        return Array(plan.deleted.dropFirst())
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
