import RevsyncWire

/// Builds the corrective set of a rejected change set from the records storage reads for it:
/// first every record the set touched (`lookups`, then `settle`), then, level by level, the
/// records depending on what it tried to delete (`takeFrontier`, then `addDependents`), which
/// the device may have removed (cascade) or changed (set null) locally.
///
/// Past `maxBytes` it throws `TooLarge`, so a reader stops at once and sends `resync` instead.
public struct CorrectionPlan: Sendable {
    public struct TooLarge: Error {}

    public private(set) var corrective: CorrectiveSet
    public let maxBytes: Int
    /// Each key as the device knows it, with the permanent id to look up (if any).
    private let wanted: [(sent: RecordKey, permanent: Int64?)]
    private let deletedRoots: Set<RecordKey>
    /// The on-delete walk, with every child allowed: all dependents are reported.
    private var walk: DeletePlan
    private var kept: Set<RecordKey> = []

    /// - Parameter known: the device's mappings of the temporary ids in `CorrectionScope(of: changeSet)`.
    public init(for changeSet: ChangeSet, reason: ConflictReason, schema: DatasetSchema, known: [Int64: TemporaryIdMapping], maxBytes: Int) {
        let scope = CorrectionScope(of: changeSet, schema: schema)
        corrective = CorrectiveSet(seq: changeSet.seq, reason: reason)
        self.maxBytes = maxBytes
        wanted = (scope.created + scope.records).map { ($0, TemporaryIdResolver.permanentId($0, known: known)) }
        deletedRoots = Set(scope.deletedRoots)
        walk = DeletePlan(roots: [])
    }

    /// The temporary ids whose mappings `init` needs.
    public static func temporaryIds(of changeSet: ChangeSet, schema: DatasetSchema) -> [Int64] {
        let scope = CorrectionScope(of: changeSet, schema: schema)
        return (scope.records + scope.created).map(\.id).filter { $0 < 0 }
    }

    /// The stored records to read first, by entity.
    public var lookups: [String: [Int64]] {
        Dictionary(grouping: wanted.compactMap { item in item.permanent.map { RecordKey(item.sent.entity, $0) } }, by: \.entity)
            .mapValues { $0.map(\.id) }
    }

    /// Reports each touched record as it is (`found`), or as gone; then starts the walk from the deleted ones.
    public mutating func settle(found: [RecordKey: StoredRecord]) throws(TooLarge) {
        var roots: [RecordKey] = []
        for (sent, permanent) in wanted {
            if let permanent, let record = found[RecordKey(sent.entity, permanent)] {
                corrective.keep(sent.entity, record, temporaryId: sent.id < 0 ? sent.id : nil)
            } else {
                corrective.drop(sent.entity, sent.id)
            }
            if deletedRoots.contains(sent), let permanent { roots.append(RecordKey(sent.entity, permanent)) }
        }
        walk = DeletePlan(roots: roots)
        if corrective.approximateBytes > maxBytes { throw TooLarge() }
    }

    /// Parents whose dependents have not been read yet, by entity.
    public mutating func takeFrontier() -> [String: [Int64]] { walk.takeFrontier() }

    /// How many more records could still fit: no record takes fewer than 48 bytes.
    public var room: Int { (maxBytes - corrective.approximateBytes) / 48 + 1 }

    /// Reports the records found referencing the frontier's `parentEntity` through `relation`.
    public mutating func addDependents(_ relation: Relation, parentEntity: String, records: [StoredRecord]) throws(TooLarge) {
        var children: [(child: Int64, parent: Int64)] = []
        for record in records where kept.insert(RecordKey(relation.child, record.id)).inserted {
            corrective.keep(relation.child, record, temporaryId: nil)
            if corrective.approximateBytes > maxBytes { throw TooLarge() }
            if case .integer(let parent)? = record.values[relation.attribute] { children.append((record.id, parent)) }
        }
        // Every child may be walked: the walk here reports, it does not delete.
        try? walk.addDependents(relation, parentEntity: parentEntity, children: children, permissions: Permissions(create: true, update: true, delete: true))
    }

    /// The corrective set, or the instruction to re-bootstrap when it passed `maxBytes`.
    public func encoded(schema: DatasetSchema) -> [UInt8] { corrective.encoded(schema: schema) }

    public var resync: [UInt8] { CorrectiveSet.resync(seq: corrective.seq, reason: corrective.reason, limit: maxBytes) }
}
