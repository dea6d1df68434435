import RevsyncRules
import RevsyncWire

/// One local edit: creates, updates and deletes across entities that commit
/// together, and become one change set in the outbox.
///
/// Edits show at once in reads made through the transaction. Records created
/// here get negative temporary ids; other edits in the same transaction (and
/// later ones) may reference them. A transaction is only valid inside the closure
/// it is handed to.
public final class Transaction {
    let schema: LocalSchema
    private var editor: StoreEditor
    private var draft = ChangeSet()
    private(set) var nextTemporaryId: Int64
    private var createdHere: Set<RecordKey> = []
    /// Records deleted here (cascades included), for the restrict check at the end.
    private var deletedHere: [RecordKey] = []

    init(store: any RecordStore, schema: LocalSchema, nextTemporaryId: Int64) {
        self.schema = schema
        self.editor = StoreEditor(store: store, schema: schema)
        self.nextTemporaryId = nextTemporaryId
    }

    private var store: any RecordStore { editor.store }

    var changes: RecordChanges { editor.changes }

    // MARK: Reads

    /// The record as the device sees it now; a temporary id the server has since
    /// replaced still finds the record under its permanent id.
    public func record(_ entity: String, id: Int64) throws -> DeviceRecord? {
        _ = try schema.entity(entity)
        return try store.record(entity, id: try store.currentId(of: entity, id))
    }

    public func records(_ entity: String, matching query: RecordQuery = .all) throws -> [DeviceRecord] {
        try store.records(entity, matching: try query.checked(for: entity, schema: schema, store: store))
    }

    // MARK: Edits

    /// Creates a record and returns its temporary id. Omitted nullable attributes
    /// are null; every non-nullable one must be given.
    @discardableResult
    public func create(_ entity: String, _ attributes: Attributes) throws -> Int64 {
        let description = try schema.entity(entity)
        guard description.permissions.create else { throw DeviceError.forbidden(entity: entity, operation: "create") }
        var values = try checkedValues(attributes, of: entity)
        for attribute in description.attributes where values[attribute.name] == nil {
            guard attribute.nullable else { throw DeviceError.missingAttribute(entity: entity, attribute: attribute.name) }
            values[attribute.name] = .null
        }
        let id = nextTemporaryId
        nextTemporaryId -= 1
        try editor.put(entity, DeviceRecord(id: id, revision: 0, attributes: values))
        draft[entity].create.append(id)
        draft[entity].attributes[id] = values
        createdHere.insert(RecordKey(entity, id))
        return id
    }

    /// Changes some attributes of a record. The change set carries the record's
    /// revision as last received from the server (0 for an unacknowledged create).
    public func update(_ entity: String, id: Int64, _ attributes: Attributes) throws {
        let description = try schema.entity(entity)
        guard description.permissions.update else { throw DeviceError.forbidden(entity: entity, operation: "update") }
        let id = try store.currentId(of: entity, id)
        guard var record = try store.record(entity, id: id) else { throw DeviceError.recordNotFound(entity: entity, id: id) }
        let values = try checkedValues(attributes, of: entity)
        guard !values.isEmpty else { return }
        record.attributes.merge(values) { _, new in new }
        try editor.put(entity, record)
        if createdHere.contains(RecordKey(entity, id)) || draft[entity].update.contains(id) {
            draft[entity].attributes[id, default: [:]].merge(values) { _, new in new }
        } else {
            draft[entity].update.append(id)
            var sent = values
            sent[ReservedAttribute.revision] = .integer(record.revision)
            draft[entity].attributes[id] = sent
        }
    }

    /// Deletes a record. As on the server, records referencing it are deleted
    /// (on delete cascade) or have the reference cleared (set null) locally; a
    /// restrict reference from a record that still exists when the transaction
    /// ends makes the transaction fail.
    public func delete(_ entity: String, id: Int64) throws {
        let description = try schema.entity(entity)
        guard description.permissions.delete else { throw DeviceError.forbidden(entity: entity, operation: "delete") }
        let id = try store.currentId(of: entity, id)
        guard let record = try store.record(entity, id: id) else { throw DeviceError.recordNotFound(entity: entity, id: id) }
        let key = RecordKey(entity, id)
        let cascaded: [RecordKey]
        do {
            // The server refuses a cascade into records the role may not delete.
            cascaded = try editor.delete(entity, id: id) { [schema] child in schema.entityIfKnown(child)?.permissions ?? .none }
        } catch let reason as ConflictReason where reason.code == .forbidden {
            throw DeviceError.forbidden(entity: reason.entity ?? entity, operation: "delete (by cascade from \(key))")
        }
        deletedHere.append(key)
        deletedHere += cascaded

        var vanished: Set<RecordKey> = []
        if createdHere.remove(key) != nil {
            dropFromDraft(key)
            vanished.insert(key)
        } else {
            dropFromDraft(key)
            draft[entity].delete.append(id)
            draft[entity].attributes[id] = [ReservedAttribute.revision: .integer(record.revision)]
        }
        // Records created here and cascaded never reach the server; updates of
        // existing ones stay (the server applies updates before deletes, then cascades).
        for child in cascaded where createdHere.remove(child) != nil {
            dropFromDraft(child)
            vanished.insert(child)
        }
        if !vanished.isEmpty { try clearReferences(to: vanished) }
    }

    // MARK: Finishing

    /// The change set of the whole transaction (nil when it changed nothing),
    /// after checking restrict references.
    func finish() throws -> ChangeSet? {
        for key in deletedHere {
            for relation in schema.relations(to: key.entity) where relation.rule == .restrict {
                if let childId = try store.ids(relation.child, where: relation.attribute, equals: key.id).first {
                    throw DeviceError.restricted(
                        entity: key.entity, id: key.id, referencedBy: RecordKey(relation.child, childId), attribute: relation.attribute)
                }
            }
        }
        var result = ChangeSet()
        for entity in draft.types {
            guard let changes = draft.entities[entity], !changes.isEmpty else { continue }
            result[entity] = changes
        }
        return result.types.isEmpty ? nil : result
    }

    // MARK: Helpers

    /// App values checked against the schema, references resolved and checked to exist.
    private func checkedValues(_ attributes: Attributes, of entity: String) throws -> Attributes {
        var values: Attributes = [:]
        for (name, value) in attributes {
            guard let attribute = schema.attribute(entity, name) else {
                throw DeviceError.unknownAttribute(entity: entity, attribute: name)
            }
            var checked = try schema.validated(value, for: attribute, of: entity)
            if let target = attribute.references, case .integer(let referenced) = checked {
                let current = try store.currentId(of: target, referenced)
                guard try store.record(target, id: current) != nil else {
                    throw DeviceError.referenceNotFound(entity: entity, attribute: name, id: referenced)
                }
                checked = .integer(current)
            }
            values[name] = checked
        }
        return values
    }

    private func dropFromDraft(_ key: RecordKey) {
        guard draft.entities[key.entity] != nil else { return }
        draft[key.entity].create.removeAll { $0 == key.id }
        draft[key.entity].update.removeAll { $0 == key.id }
        draft[key.entity].attributes[key.id] = nil
    }

    /// Edits in the draft that reference records created and deleted here: a
    /// cleared (set null) reference is cleared in the draft too; anything else
    /// would send a reference to a temporary id the server never sees.
    private func clearReferences(to vanished: Set<RecordKey>) throws {
        for entity in draft.types {
            let references = schema.referenceAttributes(of: entity)
            guard !references.isEmpty, let changes = draft.entities[entity] else { continue }
            for (id, values) in changes.attributes {
                for attribute in references {
                    guard let target = attribute.references, case .integer(let referenced)? = values[attribute.name],
                        vanished.contains(RecordKey(target, referenced))
                    else { continue }
                    guard try store.record(entity, id: id) != nil else {
                        throw DeviceError.unsupportedEdit(
                            "\(entity) \(id) was changed to reference \(target) \(referenced), which this transaction created and deleted")
                    }
                    draft[entity].attributes[id]?[attribute.name] = .null
                }
            }
        }
    }
}
