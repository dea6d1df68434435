/// One change set of one device: the server's public id of the device and its `seq`.
public struct ChangeSetRef: Sendable, Hashable, Comparable, Codable, CustomStringConvertible {
    /// The device's public id (a UUID), lowercased so that either spelling compares equal.
    public var device: String
    public var seq: Int64

    public init(device: String, seq: Int64) {
        self.device = device.lowercased()
        self.seq = seq
    }

    public static func < (lhs: ChangeSetRef, rhs: ChangeSetRef) -> Bool { (lhs.device, lhs.seq) < (rhs.device, rhs.seq) }

    public var description: String { "device \(device) seq \(seq)" }
}

/// A change set the server rejected (a `revsync_outcomes` row with a reason).
public struct ServerRejection: Sendable, Hashable, Codable {
    public var changeSet: ChangeSetRef
    /// The reason's code (`stale_revision`, `not_found`, …).
    public var code: String

    public init(changeSet: ChangeSetRef, code: String) {
        self.changeSet = changeSet
        self.code = code
    }
}

/// A temporary id of one device that produced more than one record: the same
/// `(device, entity, __oldId__)` in the author bodies of several log entries.
public struct DuplicateTemporaryId: Sendable, Hashable, Codable, CustomStringConvertible {
    public var device: String
    public var entity: String
    public var temporaryId: Int64
    /// The permanent ids it became, in revision order.
    public var ids: [Int64]
    /// The revisions whose log entries created them.
    public var revisions: [Int64]

    public init(device: String, entity: String, temporaryId: Int64, ids: [Int64], revisions: [Int64]) {
        self.device = device.lowercased()
        self.entity = entity
        self.temporaryId = temporaryId
        self.ids = ids
        self.revisions = revisions
    }

    public var description: String {
        "device \(device) \(entity) \(temporaryId) became ids \(ids.map(String.init).joined(separator: ", ")) at revisions \(revisions.map(String.init).joined(separator: ", "))"
    }
}

/// Whether the retained log holds every revision of `horizon+1 … head` once.
public struct LogGaps: Sendable, Hashable, Codable {
    public var head: Int64
    public var horizon: Int64
    /// Revisions of `horizon+1 … head` with no log entry.
    public var missing: Int64
    public var firstMissing: Int64?
    /// Log entries outside `horizon+1 … head` (which the head row says cannot exist).
    public var outOfRange: Int64

    public init(head: Int64, horizon: Int64, missing: Int64, firstMissing: Int64?, outOfRange: Int64) {
        self.head = head
        self.horizon = horizon
        self.missing = missing
        self.firstMissing = firstMissing
        self.outOfRange = outOfRange
    }
}

/// What the server's log and outcomes say, read in one snapshot of PostgreSQL.
public struct LogAudit: Sendable, Hashable {
    public var gaps: LogGaps
    public var head: Int64 { gaps.head }
    public var horizon: Int64 { gaps.horizon }
    /// Every committed (device, seq): those in the retained log, plus those whose
    /// outcome names a revision at or below the horizon (their entries were pruned).
    public var committed: Set<ChangeSetRef>
    /// (device, seq) pairs with more than one log entry: a change set applied twice.
    public var repeated: [ChangeSetRef]
    /// Temporary ids that produced more than one record, in the retained log.
    public var duplicates: [DuplicateTemporaryId]
    public var rejections: [ServerRejection]

    public init(
        gaps: LogGaps, committed: Set<ChangeSetRef>, repeated: [ChangeSetRef], duplicates: [DuplicateTemporaryId],
        rejections: [ServerRejection]
    ) {
        self.gaps = gaps
        self.committed = committed
        self.repeated = repeated
        self.duplicates = duplicates
        self.rejections = rejections
    }
}
