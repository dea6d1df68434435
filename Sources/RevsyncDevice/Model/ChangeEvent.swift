/// A change of the local data, published on `SyncEngine.changes()`.
public struct ChangeEvent: Sendable, Hashable {
    public enum Origin: Sendable, Hashable {
        /// A local transaction, queued as the change set with this `seq`.
        case local(seq: Int64)
        /// A sync response was applied.
        case sync
        /// The local data was reloaded from a snapshot (pending local changes kept):
        /// every entity may have changed; `records` is empty.
        case bootstrap
    }

    public var origin: Origin
    /// The records written or removed.
    public var records: RecordChanges
    /// Temporary ids replaced by permanent ones in this step.
    public var idMappings: [IdMapping]
    /// Temporary ids replaced by other temporary ids in this step: a restored device
    /// whose new records had ids the server already knew as others (see docs/device.md,
    /// "Restored devices"). The old ids keep finding the records; records read from
    /// now on carry the new ones.
    public var renamedTemporaryIds: [TemporaryIdRename]

    public init(origin: Origin, records: RecordChanges, idMappings: [IdMapping] = [], renamedTemporaryIds: [TemporaryIdRename] = []) {
        self.origin = origin
        self.records = records
        self.idMappings = idMappings
        self.renamedTemporaryIds = renamedTemporaryIds
    }
}
