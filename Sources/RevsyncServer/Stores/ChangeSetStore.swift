import RevsyncRules
import RevsyncWire

/// What the server keeps of a device's seqs, read without locks.
package protocol LedgerReading {
    /// The device's temporary ids among `ids`, with what they became.
    func mappings(_ ids: Set<Int64>, device: Device) async throws -> [Int64: TemporaryIdMapping]
    /// The lowest temporary id the server has mapped for the device, 0 for none.
    func lowestTemporaryId(_ device: Device) async throws -> Int64
}

/// The device's row, locked for the change set's transaction.
package struct DeviceLock: Sendable {
    package let lastSeq: Int64
    package let revoked: Bool

    package init(lastSeq: Int64, revoked: Bool) {
        self.lastSeq = lastSeq
        self.revoked = revoked
    }
}

/// A batch's devices, locked, with the temporary ids it asked about and the new ids it needs.
package struct LockedDevices: Sendable {
    /// Gone devices are absent.
    package var locks: [Int64: DeviceLock]
    package var known: [Int64: [Int64: TemporaryIdMapping]]
    package var ids: [String: [Int64]]

    package init(locks: [Int64: DeviceLock], known: [Int64: [Int64: TemporaryIdMapping]], ids: [String: [Int64]]) {
        self.locks = locks
        self.known = known
        self.ids = ids
    }
}

/// What a seq handled before came to.
package struct StoredOutcome: Sendable {
    /// The revision it committed as, or nil when it was rejected.
    package let revision: Int64?
    package let reason: ConflictReason?
    /// Outcomes from before digests kept the rejected change set itself.
    package let changeSet: ChangeSet?
    /// nil for an outcome from before digests.
    package let digest: [UInt8]?

    package init(revision: Int64?, reason: ConflictReason?, changeSet: ChangeSet?, digest: [UInt8]?) {
        self.revision = revision
        self.reason = reason
        self.changeSet = changeSet
        self.digest = digest
    }
}

/// A change set the rules accepted, as storage writes it.
package struct PlannedWrite: Sendable {
    package let plan: WritePlan
    package let digest: [UInt8]
    package let device: Device

    package init(plan: WritePlan, digest: [UInt8], device: Device) {
        self.plan = plan
        self.digest = digest
        self.device = device
    }
}

/// A change set the rules rejected, whose seq keeps its outcome.
package struct PlannedRejection: Sendable {
    package let reason: ConflictReason
    package let seq: Int64
    package let digest: [UInt8]
    package let device: Device

    package init(reason: ConflictReason, seq: Int64, digest: [UInt8], device: Device) {
        self.reason = reason
        self.seq = seq
        self.digest = digest
        self.device = device
    }
}

/// One batch's transaction: facts loaded under locks for many change sets at once, in a
/// few set-based statements, and the writes the rules decided, again in a few statements.
package protocol ApplyTransaction: LedgerReading {
    /// Every device's temporary ids among those asked, with what they became; and new
    /// permanent ids, ascending, as many per entity as asked (one round trip for both).
    func mappings(_ wanted: [Int64: Set<Int64>], allocating counts: [String: Int]) async throws -> (known: [Int64: [Int64: TemporaryIdMapping]], ids: [String: [Int64]])
    /// Locks the devices' rows, in id order, so that a device's change sets apply one batch
    /// at a time and a revocation waits for them (gone devices are absent); with them, the
    /// `mappings` asked for, in the same step (PostgreSQL: one statement). The mappings are
    /// those after the locks: ids that another transaction mapped for a device while this
    /// one waited for its row are among them.
    func lockDevices(_ ids: [Int64], mappings wanted: [Int64: Set<Int64>], allocating counts: [String: Int]) async throws -> LockedDevices
    func storedOutcome(seq: Int64, device: Device) async throws -> StoredOutcome?
    /// Locks the records against other writers and returns their versions; missing ones are absent.
    func lockVersions(_ keys: [RecordKey]) async throws -> [RecordKey: RecordVersion]
    /// Keeps the records from being deleted until COMMIT and returns those that exist.
    func lockReferenced(_ keys: [RecordKey]) async throws -> Set<RecordKey>
    /// Locks and returns the records of `relation.child` whose `relation.attribute` is one of `parents`.
    func lockChildren(_ relation: Relation, parents: [Int64]) async throws -> [ApplyPlanner.Child]
    /// Writes the records of `writes` (whose footprints do not overlap) and remembers their
    /// created ids. A rule the database itself enforces (a unique value, a CHECK) throws
    /// `ConflictReason`, here, at `checkConstraints`, or at COMMIT for foreign keys, which
    /// are deferred so that creates may come in any order; what was written is then undone
    /// only by a savepoint or a rollback.
    func writeRecords(_ writes: [PlannedWrite]) async throws
    /// Checks the deferred foreign keys now (throws `ConflictReason`), for a change set written on its own.
    func checkConstraints() async throws
    /// Takes the revision lock now, ahead of `stamp`. The isolated run writes its records
    /// before it stamps them: a new unique value held while it waited for the lock would be a
    /// deadlock with another instance's batch that holds the lock and writes the same value.
    func lockRevisions() async throws
    /// Takes the next `writes.count` revisions, in order, and stamps them on the written
    /// records, the log entries and the seqs' outcomes; remembers the rejections' outcomes and
    /// moves each device's last seq. The revision lock is taken here, last, and held only
    /// until COMMIT (unless `lockRevisions` took it); without writes no revision is taken. It
    /// ends the transaction: storage commits right after it, and nothing runs after it.
    func stamp(_ writes: [PlannedWrite], rejections: [PlannedRejection], lastSeqs: [Int64: Int64]) async throws -> [CommittedEntry]
    /// `writeRecords` then `stamp`, as one step where storage can make it one (PostgreSQL: one
    /// statement, one round trip fewer a batch). It throws what either would.
    func writeAndStamp(_ writes: [PlannedWrite], rejections: [PlannedRejection], lastSeqs: [Int64: Int64]) async throws -> [CommittedEntry]
    /// Subtransactions, for a batch whose writes PostgreSQL refused: each change set is then
    /// written on its own, and one that fails is undone alone.
    func savepoint() async throws
    func rollbackToSavepoint() async throws
}

/// Where change sets are applied: a transaction per batch.
package protocol ChangeSetStore: Sendable {
    /// Runs `body` in one transaction (again when the database reports a deadlock); rolls back when it throws.
    func transaction<T: Sendable>(_ body: @escaping @Sendable (any ApplyTransaction) async throws -> T) async throws -> T
    /// The newest dataset schema the database was migrated to (by any instance), if any.
    func newestDatasetSchema() async throws -> DatasetSchema?
}

extension ApplyTransaction {
    package func writeAndStamp(_ writes: [PlannedWrite], rejections: [PlannedRejection], lastSeqs: [Int64: Int64]) async throws -> [CommittedEntry] {
        try await writeRecords(writes)
        return try await stamp(writes, rejections: rejections, lastSeqs: lastSeqs)
    }
}
