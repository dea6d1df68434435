import RevsyncWire

/// Checks a change set against the schema and the device's role, before any storage is read.
///
/// Everything decidable from the change set alone is decided here: unknown entities
/// and attributes, wrong types, missing required attributes, ids in the wrong list,
/// and permissions. Existence and revisions need storage and come later.
public struct ChangeSetValidator: Sendable {
    public let schema: DatasetSchema
    public let role: String
    /// Most creates, updates and deletes in one change set.
    public let maxOperations: Int

    public init(schema: DatasetSchema, role: String, maxOperations: Int = .max) {
        self.schema = schema
        self.role = role
        self.maxOperations = maxOperations
    }

    public func validate(_ changeSet: ChangeSet) -> Result<NormalizedChangeSet, ConflictReason> {
        do {
            return .success(try normalize(changeSet))
        } catch {
            return .failure(error)
        }
    }

    private func normalize(_ changeSet: ChangeSet) throws(ConflictReason) -> NormalizedChangeSet {
        var result = NormalizedChangeSet(
            seq: changeSet.seq, types: changeSet.types, creates: [], updates: [], deletes: [],
            createdHere: [:], temporaryIdsToResolve: [:])
        // An empty change set would take a revision for nothing (and let a read-only role grow the log).
        let operations = changeSet.types.reduce(0) { count, name in
            let changes = changeSet.entities[name]
            return count + (changes?.create.count ?? 0) + (changes?.update.count ?? 0) + (changes?.delete.count ?? 0)
        }
        guard operations > 0 else {
            throw invalid(nil, nil, "the change set holds no create, update or delete: send only change sets that change something")
        }
        guard operations <= maxOperations else {
            throw invalid(nil, nil, "the change set holds \(operations) operations; the limit is \(maxOperations): split it into smaller change sets")
        }

        // Temporary ids created anywhere in the set may be referenced from any entity in it.
        for name in changeSet.types {
            for id in changeSet.entities[name]?.create ?? [] where id < 0 {
                if result.createdHere[id] != nil {
                    throw invalid(name, id, "temporary id \(id) is created twice in this change set")
                }
                result.createdHere[id] = name
            }
        }

        for name in changeSet.types {
            guard let changes = changeSet.entities[name] else { continue }
            guard let entity = schema.entity(named: name) else {
                throw invalid(name, nil, "unknown entity \"\(name)\"")
            }
            let permissions = entity.permissions(for: role)
            try checkLists(changes, entity: name)
            if !changes.create.isEmpty && !permissions.create {
                throw ConflictReason(code: .forbidden, entity: name, id: changes.create[0], message: "role \"\(role)\" may not create \(name)")
            }
            if !changes.update.isEmpty && !permissions.update {
                throw ConflictReason(code: .forbidden, entity: name, id: changes.update[0], message: "role \"\(role)\" may not update \(name)")
            }
            if !changes.delete.isEmpty && !permissions.delete {
                throw ConflictReason(code: .forbidden, entity: name, id: changes.delete[0], message: "role \"\(role)\" may not delete \(name)")
            }
            for id in changes.create {
                let values = try checkedValues(changes.attributes[id] ?? [:], entity: entity, id: id, creating: true, result: &result)
                result.creates.append(CreateOperation(entity: name, temporaryId: id, values: values))
            }
            for id in changes.update {
                let given = changes.attributes[id] ?? [:]
                let basis = try basisRevision(given, entity: name, id: id, operation: "update")
                let values = try checkedValues(given, entity: entity, id: id, creating: false, result: &result)
                try noteTemporary(id, entity: name, result: &result)
                result.updates.append(UpdateOperation(entity: name, id: id, basis: basis, values: values))
            }
            for id in changes.delete {
                let basis = try basisRevision(changes.attributes[id] ?? [:], entity: name, id: id, operation: "delete")
                try noteTemporary(id, entity: name, result: &result)
                result.deletes.append(DeleteOperation(entity: name, id: id, basis: basis))
            }
        }
        return result
    }

    private func checkLists(_ changes: EntityChanges, entity: String) throws(ConflictReason) {
        for id in changes.create where id >= 0 {
            throw invalid(entity, id, "create needs a negative temporary id, not \(id)")
        }
        var listed: Set<Int64> = []
        for id in changes.update + changes.delete {
            guard id != 0 else { throw invalid(entity, id, "0 is not a record id") }
            guard listed.insert(id).inserted else {
                throw invalid(entity, id, "\(entity) \(id) appears twice in update and delete")
            }
        }
        for id in changes.attributes.keys where !listed.contains(id) && !changes.create.contains(id) {
            throw invalid(entity, id, "attributes for \(entity) \(id), which is not in create, update or delete")
        }
    }

    private func basisRevision(_ given: Attributes, entity: String, id: Int64, operation: String) throws(ConflictReason) -> Int64 {
        guard let value = given[ReservedAttribute.revision] else {
            throw invalid(entity, id, "\(operation) of \(entity) \(id) needs \"revision\": the record's revision as last received (0 if never acknowledged)")
        }
        guard let revision = value.integerValue, revision >= 0 else {
            throw invalid(entity, id, "\"revision\" of \(entity) \(id) must be a non-negative integer, not \(value.kindName)")
        }
        return revision
    }

    /// Checks and canonicalizes attribute values; for a create, fills omitted nullable attributes with null.
    private func checkedValues(
        _ given: Attributes, entity: Entity, id: Int64, creating: Bool, result: inout NormalizedChangeSet
    ) throws(ConflictReason) -> Attributes {
        var values: Attributes = [:]
        for (name, value) in given where name != ReservedAttribute.revision && name != ReservedAttribute.oldId {
            guard let attribute = entity.attribute(named: name) else {
                throw invalid(entity.name, id, "unknown attribute \"\(name)\" of \(entity.name)")
            }
            values[name] = try checkedValue(value, attribute: attribute, entity: entity.name, id: id, result: &result)
        }
        if creating {
            for attribute in entity.attributes where values[attribute.name] == nil {
                guard attribute.nullable else {
                    throw invalid(entity.name, id, "missing required attribute \"\(attribute.name)\" of \(entity.name)")
                }
                values[attribute.name] = .null
            }
        }
        return values
    }

    private func checkedValue(
        _ value: JSONValue, attribute: AttributeDescription, entity: String, id: Int64, result: inout NormalizedChangeSet
    ) throws(ConflictReason) -> JSONValue {
        let checked: JSONValue
        do {
            checked = try attribute.checked(value)
        } catch {
            throw invalid(entity, id, "attribute \"\(attribute.name)\" of \(entity) \(error.message)")
        }
        if let target = attribute.references, case .integer(let number) = checked, number < 0 {
            try checkTemporaryReference(number, target: target, attribute: attribute.name, entity: entity, id: id, result: &result)
        }
        return checked
    }

    private func checkTemporaryReference(
        _ temporaryId: Int64, target entityName: String, attribute: String, entity: String, id: Int64, result: inout NormalizedChangeSet
    ) throws(ConflictReason) {
        if let created = result.createdHere[temporaryId] {
            guard created == entityName else {
                throw ConflictReason(
                    code: .reference, entity: entity, id: id,
                    message: "attribute \"\(attribute)\" of \(entity) must reference \(entityName), but temporary id \(temporaryId) is a new \(created)")
            }
        } else {
            try noteTemporary(temporaryId, entity: entityName, result: &result)
        }
    }

    private func noteTemporary(_ id: Int64, entity: String, result: inout NormalizedChangeSet) throws(ConflictReason) {
        guard id < 0 else { return }
        if let created = result.createdHere[id] {
            throw invalid(entity, id, "temporary id \(id) is created in this change set (a new \(created)) and cannot also be updated or deleted in it")
        }
        if let expected = result.temporaryIdsToResolve[id], expected != entity {
            throw ConflictReason(code: .reference, entity: entity, id: id, message: "temporary id \(id) is used both as \(expected) and as \(entity)")
        }
        result.temporaryIdsToResolve[id] = entity
    }

    private func invalid(_ entity: String?, _ id: Int64?, _ message: String) -> ConflictReason {
        ConflictReason(code: .invalid, entity: entity, id: id, message: message)
    }
}

extension ConflictReason: Error {}
