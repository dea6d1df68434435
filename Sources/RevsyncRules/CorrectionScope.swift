import RevsyncWire

/// Which records a corrective set must report for a rejected change set.
///
/// Every record the change set touched, the records its references point to,
/// and (found in storage, see `deletedRoots`) the records referencing the ones it
/// tried to delete, which the device may have removed or changed locally.
public struct CorrectionScope: Sendable, Hashable {
    /// Ids as the device sent them: temporary or permanent.
    public var records: [RecordKey] = []
    /// Temporary ids the rejected set created: gone unless an earlier set created them.
    public var created: [RecordKey] = []
    /// Records the set tried to delete, whose dependents must be reported too.
    public var deletedRoots: [RecordKey] = []

    public init(of changeSet: ChangeSet, schema: DatasetSchema) {
        var seen: Set<RecordKey> = []
        func add(_ key: RecordKey) {
            if seen.insert(key).inserted { records.append(key) }
        }
        for name in changeSet.types {
            guard let entity = schema.entity(named: name), let changes = changeSet.entities[name] else { continue }
            for id in changes.create where id < 0 {
                created.append(RecordKey(name, id))
            }
            for id in changes.update where id != 0 { add(RecordKey(name, id)) }
            for id in changes.delete where id != 0 {
                add(RecordKey(name, id))
                deletedRoots.append(RecordKey(name, id))
            }
            for (_, values) in changes.attributes.sorted(by: { $0.key < $1.key }) {
                for attribute in entity.attributes {
                    guard let target = attribute.references, case .integer(let id)? = values[attribute.name], id != 0 else { continue }
                    // A reference to a record the same set creates is covered by `created`.
                    if id < 0, changeSet.types.contains(where: { changeSet.entities[$0]?.create.contains(id) ?? false }) { continue }
                    add(RecordKey(target, id))
                }
            }
        }
    }
}
