import RevsyncWire

/// A local change set the server rejected, and what the device did about it.
///
/// When it is delivered the local store already holds the server's truth for
/// every record the corrective set carried, and the rejected change set is gone
/// from the outbox: its edits are undone, later pending edits stay on top. When
/// the server's repair was too large to send (`resync`), the corrective set
/// carried no records and the engine loaded a snapshot instead, before
/// delivering the notification (unless that failed: the next sync loads it).
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
    /// The server's repair was too large to send (`"resync": true`): `restored` and
    /// `dropped` are empty, and the device bootstraps again from `GET /snapshot`
    /// (a `.bootstrap` change event), which undoes the rejected edits.
    public var resync: Bool

    public init(
        id: Int64? = nil, seq: Int64?, reason: ConflictReason, rejected: ChangeSet?,
        restored: [String: [DeviceRecord]], dropped: [String: [Int64]], resync: Bool = false
    ) {
        self.id = id
        self.seq = seq
        self.reason = reason
        self.rejected = rejected
        self.restored = restored
        self.dropped = dropped
        self.resync = resync
    }

    private enum CodingKeys: String, CodingKey {
        case id, seq, reason, rejected, restored, dropped, resync
    }

    /// Notifications stored before `resync` existed decode with it false.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        id = try container.decodeIfPresent(Int64.self, forKey: .id)
        seq = try container.decodeIfPresent(Int64.self, forKey: .seq)
        reason = try container.decode(ConflictReason.self, forKey: .reason)
        rejected = try container.decodeIfPresent(ChangeSet.self, forKey: .rejected)
        restored = try container.decode([String: [DeviceRecord]].self, forKey: .restored)
        dropped = try container.decode([String: [Int64]].self, forKey: .dropped)
        resync = try container.decodeIfPresent(Bool.self, forKey: .resync) ?? false
    }
}
