import RevsyncWire

/// Works out what deletes do to the records that reference them: the on-delete
/// walk of the server's change sets and of the device's local deletes alike.
///
/// Storage is asked level by level for dependents (`takeFrontier`, then
/// `addDependents`, or `complete` for storage that answers synchronously); the
/// plan applies the schema's on-delete rules: cascade adds the child to the
/// deletes (the role must be allowed to delete it), set null clears the
/// reference, restrict refuses unless the child is deleted too.
public struct DeletePlan: Sendable {
    public private(set) var deleted: [RecordKey] = []
    private var deletedSet: Set<RecordKey> = []
    /// Reference attributes to clear, per surviving child record.
    private var nullified: [RecordKey: [String]] = [:]
    private var restricted: [(child: RecordKey, parent: RecordKey, attribute: String)] = []
    private var frontier: [String: [Int64]] = [:]

    public init(roots: [RecordKey]) {
        for key in roots { addDelete(key) }
    }

    private mutating func addDelete(_ key: RecordKey) {
        guard deletedSet.insert(key).inserted else { return }
        deleted.append(key)
        frontier[key.entity, default: []].append(key.id)
    }

    /// Deleted records whose dependents have not been looked up yet, by entity.
    public mutating func takeFrontier() -> [String: [Int64]] {
        defer { frontier = [:] }
        return frontier
    }

    /// Records the children found for `relation` (whose parent entity was in the frontier).
    public mutating func addDependents(
        _ relation: Relation, parentEntity: String, children: [(child: Int64, parent: Int64)], permissions: Permissions
    ) throws(ConflictReason) {
        for (childId, parentId) in children {
            let child = RecordKey(relation.child, childId)
            switch relation.rule {
            case .cascade:
                guard permissions.delete || deletedSet.contains(child) else {
                    throw ConflictReason(
                        code: .forbidden, entity: relation.child, id: childId,
                        message: "deleting \(parentEntity) \(parentId) would delete \(child), which this role may not delete")
                }
                addDelete(child)
            case .setNull:
                nullified[child, default: []].append(relation.attribute)
            case .restrict:
                restricted.append((child, RecordKey(parentEntity, parentId), relation.attribute))
            }
        }
    }

    /// Looks up every level of dependents: `dependents` answers, for a relation and
    /// parent ids of its parent entity, the children that reference them.
    public mutating func complete(
        relations: (_ parentEntity: String) -> [Relation],
        permissions: (_ childEntity: String) -> Permissions,
        dependents: (_ relation: Relation, _ parentIds: [Int64]) throws -> [(child: Int64, parent: Int64)]
    ) throws {
        while true {
            let frontier = takeFrontier()
            if frontier.isEmpty { return }
            for (parentEntity, parentIds) in frontier.sorted(by: { $0.key < $1.key }) {
                for relation in relations(parentEntity) {
                    let children = try dependents(relation, parentIds)
                    try addDependents(relation, parentEntity: parentEntity, children: children, permissions: permissions(relation.child))
                }
            }
        }
    }

    /// The first restrict reference from a record that is not deleted, which forbids the deletes.
    public var restriction: ConflictReason? {
        restricted.first { !deletedSet.contains($0.child) }.map { child, parent, attribute in
            ConflictReason(
                code: .reference, entity: parent.entity, id: parent.id,
                message: "\(parent) cannot be deleted: \(child) references it through \"\(attribute)\" (on delete restrict)")
        }
    }

    /// The references to clear (set null), per record that is not deleted.
    public var clears: [(record: RecordKey, attributes: [String])] {
        nullified.filter { !deletedSet.contains($0.key) }
            .sorted { $0.key < $1.key }
            .map { (record: $0.key, attributes: $0.value) }
    }

    /// The reference clears to write, once every level has been looked up; or the restrict that forbids the deletes.
    public func finish() -> Result<[(record: RecordKey, attributes: [String])], ConflictReason> {
        if let restriction { return .failure(restriction) }
        return .success(clears)
    }
}
