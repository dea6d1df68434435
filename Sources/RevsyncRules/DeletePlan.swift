import RevsyncWire

/// Works out what a change set's deletes do to the records that reference them.
///
/// Storage is asked level by level for dependents (`takeFrontier`, then
/// `addDependents`); the plan applies the schema's on-delete rules: cascade adds
/// the child to the deletes (the role must be allowed to delete it), set null
/// clears the reference, restrict refuses unless the child is deleted too.
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

    /// The reference clears to write, once every level has been looked up; or the restrict that forbids the deletes.
    public func finish() -> Result<[(record: RecordKey, attributes: [String])], ConflictReason> {
        for (child, parent, attribute) in restricted where !deletedSet.contains(child) {
            return .failure(ConflictReason(
                code: .reference, entity: parent.entity, id: parent.id,
                message: "\(parent) cannot be deleted: \(child) references it through \"\(attribute)\" (on delete restrict)"))
        }
        let clears = nullified.filter { !deletedSet.contains($0.key) }
            .sorted { $0.key < $1.key }
            .map { (record: $0.key, attributes: $0.value) }
        return .success(clears)
    }
}
