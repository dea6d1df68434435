import RevsyncWire

/// Replaces temporary ids the server has mapped by their permanent ids.
public enum IdRewriter {
    /// `changeSet` with every mapped temporary id replaced: in `update` and
    /// `delete`, in the attribute keys of those, and in reference attributes
    /// (resolved against the referenced entity, found through the schema).
    ///
    /// Ids in `create` keep their temporary id: the server recognises a retried
    /// create by it (and its map), and a positive id in `create` is invalid.
    public static func rewrite(
        _ changeSet: ChangeSet, schema: LocalSchema, permanentId: (_ entity: String, _ temporaryId: Int64) -> Int64?
    ) -> ChangeSet {
        var result = changeSet
        for entity in changeSet.types {
            guard var changes = changeSet.entities[entity] else { continue }
            func mapped(_ id: Int64) -> Int64 { id < 0 ? (permanentId(entity, id) ?? id) : id }
            let created = Set(changes.create)
            let references = schema.referenceAttributes(of: entity)
            var attributes: [Int64: Attributes] = [:]
            for (id, values) in changes.attributes {
                attributes[created.contains(id) ? id : mapped(id)] = rewriteReferences(values, references, permanentId)
            }
            changes.update = changes.update.map(mapped)
            changes.delete = changes.delete.map(mapped)
            changes.attributes = attributes
            result.entities[entity] = changes
        }
        return result
    }

    /// `changeSet` with temporary ids renamed wherever they appear: in `create`,
    /// `update` and `delete`, in attribute keys and in reference attributes
    /// (resolved against the referenced entity). Unlike `rewrite`, creates change
    /// too: the new temporary id is the record's identity from now on (a restored
    /// device's records, see `ReusedSeqRepair`).
    public static func renameTemporaryIds(
        _ changeSet: ChangeSet, schema: LocalSchema, renamed: (_ entity: String, _ temporaryId: Int64) -> Int64?
    ) -> ChangeSet {
        var result = changeSet
        for entity in changeSet.types {
            guard var changes = changeSet.entities[entity] else { continue }
            func mapped(_ id: Int64) -> Int64 { id < 0 ? (renamed(entity, id) ?? id) : id }
            let references = schema.referenceAttributes(of: entity)
            var attributes: [Int64: Attributes] = [:]
            for (id, values) in changes.attributes {
                attributes[mapped(id)] = rewriteReferences(values, references, renamed)
            }
            changes.create = changes.create.map(mapped)
            changes.update = changes.update.map(mapped)
            changes.delete = changes.delete.map(mapped)
            changes.attributes = attributes
            result.entities[entity] = changes
        }
        return result
    }

    /// Every negative id `changeSet` uses outside `create`: those a map may resolve.
    public static func temporaryIdsToResolve(in changeSet: ChangeSet, schema: LocalSchema) -> Set<Int64> {
        var ids: Set<Int64> = []
        for entity in changeSet.types {
            guard let changes = changeSet.entities[entity] else { continue }
            ids.formUnion((changes.update + changes.delete).filter { $0 < 0 })
            let references = schema.referenceAttributes(of: entity)
            for values in changes.attributes.values {
                for attribute in references {
                    if case .integer(let id)? = values[attribute.name], id < 0 { ids.insert(id) }
                }
            }
        }
        return ids
    }

    static func rewriteReferences(
        _ values: Attributes, _ references: [AttributeDescription], _ permanentId: (String, Int64) -> Int64?
    ) -> Attributes {
        var values = values
        for attribute in references {
            guard let target = attribute.references, case .integer(let id)? = values[attribute.name], id < 0,
                let permanent = permanentId(target, id)
            else { continue }
            values[attribute.name] = .integer(permanent)
        }
        return values
    }
}
