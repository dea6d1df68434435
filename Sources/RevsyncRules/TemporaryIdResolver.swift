import RevsyncWire

/// A change set whose earlier temporary ids have been replaced by permanent ones.
public struct ResolvedChangeSet: Sendable, Hashable {
    public var seq: Int64?
    public var types: [String]
    /// References to records created in this set still hold their temporary ids.
    public var creates: [CreateOperation]
    public var updates: [UpdateOperation]
    public var deletes: [DeleteOperation]
    /// Existing records this set references, which must exist when it applies.
    public var referencedRecords: Set<RecordKey>
    /// The temporary id the device used for a permanent record (for `__oldId__` in corrective sets).
    public var temporaryIdOf: [RecordKey: Int64]
}

/// Replaces temporary ids from earlier change sets with their permanent ids.
public enum TemporaryIdResolver {
    /// - Parameter known: the device's map of the temporary ids this set uses.
    public static func resolve(
        _ changeSet: NormalizedChangeSet, schema: DatasetSchema, known: [Int64: TemporaryIdMapping]
    ) -> Result<ResolvedChangeSet, ConflictReason> {
        for (temporaryId, entity) in changeSet.temporaryIdsToResolve.sorted(by: { $0.key > $1.key }) {
            guard let mapping = known[temporaryId] else {
                return .failure(ConflictReason(
                    code: .reference, entity: entity, id: temporaryId,
                    message: "temporary id \(temporaryId) is unknown: no earlier change set of this device created it"))
            }
            guard mapping.entity == entity else {
                return .failure(ConflictReason(
                    code: .reference, entity: entity, id: temporaryId,
                    message: "temporary id \(temporaryId) is a \(mapping.entity) record (id \(mapping.id)), not \(entity)"))
            }
        }
        for create in changeSet.creates {
            if let used = known[create.temporaryId] {
                return .failure(ConflictReason(
                    code: .invalid, entity: create.entity, id: create.temporaryId,
                    message: "temporary id \(create.temporaryId) was already used for \(used.entity) \(used.id); temporary ids are unique per device forever"))
            }
        }

        func permanent(_ id: Int64) -> Int64 { id < 0 ? (known[id]?.id ?? id) : id }

        var resolved = ResolvedChangeSet(
            seq: changeSet.seq, types: changeSet.types, creates: [], updates: [], deletes: [],
            referencedRecords: [], temporaryIdOf: [:])
        for (temporaryId, mapping) in known where changeSet.temporaryIdsToResolve[temporaryId] != nil {
            resolved.temporaryIdOf[RecordKey(mapping.entity, mapping.id)] = temporaryId
        }

        func resolveReferences(_ values: Attributes, entity: String) -> Attributes {
            guard let definition = schema.entity(named: entity) else { return values }
            var values = values
            for attribute in definition.attributes {
                guard let target = attribute.references, case .integer(let id)? = values[attribute.name] else { continue }
                if id < 0, changeSet.createdHere[id] != nil { continue }
                let resolvedId = permanent(id)
                values[attribute.name] = .integer(resolvedId)
                resolved.referencedRecords.insert(RecordKey(target, resolvedId))
            }
            return values
        }

        for create in changeSet.creates {
            var copy = create
            copy.values = resolveReferences(create.values, entity: create.entity)
            resolved.creates.append(copy)
        }
        for update in changeSet.updates {
            var copy = update
            copy.id = permanent(update.id)
            copy.values = resolveReferences(update.values, entity: update.entity)
            resolved.updates.append(copy)
        }
        for delete in changeSet.deletes {
            var copy = delete
            copy.id = permanent(delete.id)
            resolved.deletes.append(copy)
        }
        // One record, one name: naming it by its temporary and its permanent id in one set
        // would make PostgreSQL pick one of two writes while the log merges them.
        var names: [RecordKey: Int64] = [:]
        let named = Array(zip(changeSet.updates.map { ($0.entity, $0.id) }, resolved.updates.map(\.id)))
            + Array(zip(changeSet.deletes.map { ($0.entity, $0.id) }, resolved.deletes.map(\.id)))
        for ((entity, given), id) in named {
            let key = RecordKey(entity, id)
            if let other = names[key], other != given {
                return .failure(ConflictReason(
                    code: .invalid, entity: entity, id: given,
                    message: "\(entity) \(id) is named twice in this change set, as \(other) and as \(given): use one id per record"))
            }
            names[key] = given
        }
        return .success(resolved)
    }
}

extension TemporaryIdResolver {
    /// The permanent id of a record as the device names it: its own id when positive, what an
    /// earlier change set's temporary id became, or nil (unknown, or a record of another entity).
    public static func permanentId(_ key: RecordKey, known: [Int64: TemporaryIdMapping]) -> Int64? {
        if key.id > 0 { return key.id }
        guard let mapping = known[key.id], mapping.entity == key.entity else { return nil }
        return mapping.id
    }
}
