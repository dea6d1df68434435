import RevsyncWire

/// A local change set the server rejected, and what the device did about it.
///
/// When it is delivered the local store already holds the server's truth for
/// every record the corrective set carried, and the rejected change set is gone
/// from the outbox: its edits are undone, later pending edits stay on top.
public struct ConflictNotification: Sendable, Hashable, Codable {
    /// The stored notification's id (see `SyncEngine.dismissConflicts(through:)`); nil before it is stored.
    public var id: Int64?
    /// The `seq` of the rejected change set.
    public var seq: Int64?
    /// Why the server rejected it.
    public var reason: ConflictReason
    /// The change set as the device had queued it (nil if it was no longer pending).
    public var rejected: ChangeSet?
    /// The corrective records: complete current records, by entity.
    public var restored: [String: [DeviceRecord]]
    /// Records the device dropped because they do not exist on the server, by entity.
    public var dropped: [String: [Int64]]

    public init(
        id: Int64? = nil, seq: Int64?, reason: ConflictReason, rejected: ChangeSet?,
        restored: [String: [DeviceRecord]], dropped: [String: [Int64]]
    ) {
        self.id = id
        self.seq = seq
        self.reason = reason
        self.rejected = rejected
        self.restored = restored
        self.dropped = dropped
    }
}
