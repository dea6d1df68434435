/// The records a local edit or a sync step wrote, by entity.
///
/// A record written and then removed counts as removed, and the reverse. A record
/// may appear in `upserted` although its values ended up unchanged (a pending
/// local change re-applied on top of the server's copy, for example).
public struct RecordChanges: Sendable, Hashable {
    public private(set) var upserted: [String: Set<Int64>] = [:]
    public private(set) var deleted: [String: Set<Int64>] = [:]

    public init() {}

    public var isEmpty: Bool { upserted.isEmpty && deleted.isEmpty }

    /// Entity names with at least one written or removed record.
    public var entities: Set<String> { Set(upserted.keys).union(deleted.keys) }

    mutating func noteUpsert(_ entity: String, _ id: Int64) {
        upserted[entity, default: []].insert(id)
        if deleted[entity]?.remove(id) != nil, deleted[entity]?.isEmpty == true { deleted[entity] = nil }
    }

    mutating func noteDelete(_ entity: String, _ id: Int64) {
        deleted[entity, default: []].insert(id)
        if upserted[entity]?.remove(id) != nil, upserted[entity]?.isEmpty == true { upserted[entity] = nil }
    }

    mutating func merge(_ other: RecordChanges) {
        for (entity, ids) in other.upserted { for id in ids { noteUpsert(entity, id) } }
        for (entity, ids) in other.deleted { for id in ids { noteDelete(entity, id) } }
    }
}
