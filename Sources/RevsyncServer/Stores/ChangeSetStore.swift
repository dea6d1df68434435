import RevsyncRules
import RevsyncWire

/// What the server keeps of a device's seqs, read without locks.
package protocol LedgerReading {
    /// The last seq handled for the device; `SyncRefusal.deviceGone` when it no longer exists.
    func lastSeq(_ device: Device) async throws -> Int64
    /// The device's temporary ids among `ids`, with what they became.
    func mappings(_ ids: Set<Int64>, device: Device) async throws -> [Int64: TemporaryIdMapping]
    /// Stored content digests by seq; a seq whose outcome is from before digests maps to nil, a pruned one is absent.
    func digests(_ seqs: [Int64], device: Device) async throws -> [Int64: [UInt8]?]
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

/// One change set's transaction: facts loaded under locks, and the writes a rule decided.
package protocol ApplyTransaction: LedgerReading {
    /// Locks the device's row (exclusively when the set has a seq); nil when the device is gone.
    func lockDevice(_ device: Device, forSeq: Bool) async throws -> DeviceLock?
    func storedOutcome(seq: Int64, device: Device) async throws -> StoredOutcome?
    /// Locks the records against other writers and returns their versions; missing ones are absent.
    func lockVersions(_ keys: [RecordKey]) async throws -> [RecordKey: RecordVersion]
    /// Keeps the records from being deleted until COMMIT and returns those that exist.
    func lockReferenced(_ keys: [RecordKey]) async throws -> Set<RecordKey>
    /// Locks and returns the records of `relation.child` whose `relation.attribute` is one of `parents`.
    func lockChildren(_ relation: Relation, parents: [Int64]) async throws -> [ApplyPlanner.Child]
    /// `count` new permanent ids for `entity`, ascending.
    func allocateIds(_ entity: String, count: Int) async throws -> [Int64]
    /// Carries out `plan`, stamps the next revision on it and appends its log entry. A rule the
    /// database itself enforces (a foreign key, a unique value) throws `ConflictReason`, and then
    /// nothing of the plan is written.
    func write(_ plan: WritePlan, digest: [UInt8], device: Device) async throws -> CommittedEntry
    /// Remembers a rejected seq's outcome and moves the device's last seq to it.
    func recordRejection(_ reason: ConflictReason, seq: Int64, digest: [UInt8], device: Device) async throws
}

/// Where change sets are applied: a transaction per change set, and unlocked reads for the pre-checks.
package protocol ChangeSetStore: Sendable {
    /// Runs `body` on one connection, outside a transaction.
    func read<T: Sendable>(_ body: @escaping @Sendable (any LedgerReading) async throws -> T) async throws -> T
    /// Runs `body` in one transaction (again when the database reports a deadlock); rolls back when it throws.
    func transaction<T: Sendable>(_ body: @escaping @Sendable (any ApplyTransaction) async throws -> T) async throws -> T
}
