import RevsyncRules
import RevsyncWire

/// The device's bookkeeping besides its records.
public struct DeviceMeta: Sendable, Hashable {
    /// The revision the device has fully applied (0 for a new device).
    public var maxRevision: Int64
    /// The `seq` the next local change set gets.
    public var nextSeq: Int64
    /// The temporary id the next created record gets (negative, counting down).
    public var nextTemporaryId: Int64
    /// Whether the device has loaded a snapshot.
    public var bootstrapped: Bool
    /// The server answered a rejected change set with `"resync": true` (its repair was
    /// too large to send) and no snapshot has been loaded since: the records may still
    /// show the rejected edits, so the next sync bootstraps before anything else.
    public var needsResync: Bool
    /// The server database's history id the records are of (`SyncResponse.history`), sent with
    /// every request: a database that went back since refuses it (`409 history_changed`). Nil:
    /// never received (a server from before it).
    public var history: String?
    /// The last seq of this device the server had handled when the records were loaded from a
    /// snapshot (its `lastSeq`): pending change sets through it are in the records already
    /// (sent, their answer lost), so they are not replayed over them (`OutboxReplayer`), and
    /// their acknowledgement, when it comes, finds the records as the server has them. 0: none.
    public var committedThrough: Int64

    public init(
        maxRevision: Int64 = 0, nextSeq: Int64 = 1, nextTemporaryId: Int64 = -1, bootstrapped: Bool = false, needsResync: Bool = false,
        history: String? = nil, committedThrough: Int64 = 0
    ) {
        self.maxRevision = maxRevision
        self.nextSeq = nextSeq
        self.nextTemporaryId = nextTemporaryId
        self.bootstrapped = bootstrapped
        self.needsResync = needsResync
        self.history = history
        self.committedThrough = committedThrough
    }
}

/// Storage for the pure sync rules: the local view of every entity's records,
/// the outbox, the counters and the temporary id map.
///
/// The rules call it synchronously inside one unit of work (one SQLite
/// transaction for the real store), so an implementation never sees a partial
/// edit or a partially applied response from outside. Implementations are not
/// meant to be shared across threads.
public protocol RecordStore: AnyObject {
    func record(_ entity: String, id: Int64) throws -> DeviceRecord?
    /// Inserts or replaces a complete record.
    func put(_ entity: String, _ record: DeviceRecord) throws
    /// Removes a record; false when there was none.
    @discardableResult func remove(_ entity: String, id: Int64) throws -> Bool
    /// Ids of the records of `entity` whose integer `attribute` equals `value`.
    func ids(_ entity: String, where attribute: String, equals value: Int64) throws -> [Int64]
    func records(_ entity: String, matching query: RecordQuery) throws -> [DeviceRecord]
    /// Removes every record of every entity (outbox, counters and map stay).
    func removeAllRecords() throws

    func meta() throws -> DeviceMeta
    func setMeta(_ meta: DeviceMeta) throws

    /// Pending change sets in `seq` order, each with its `seq`.
    func outbox() throws -> [ChangeSet]
    /// Adds a change set whose `seq` is set and above every pending one.
    func appendToOutbox(_ changeSet: ChangeSet) throws
    /// Replaces the pending change set with the same `seq`.
    func replaceInOutbox(_ changeSet: ChangeSet) throws
    func removeFromOutbox(seq: Int64) throws

    func temporaryIdMapping(_ temporaryId: Int64) throws -> TemporaryIdMapping?
    func setTemporaryIdMapping(_ temporaryId: Int64, to mapping: TemporaryIdMapping) throws

    /// The temporary id a record of `entity` got in place of `temporaryId` when a
    /// restored device renumbered its change sets (`ReusedSeqRepair`); nil if none.
    func renamedTemporaryId(_ entity: String, _ temporaryId: Int64) throws -> Int64?
    func setRenamedTemporaryId(_ entity: String, from temporaryId: Int64, to renamed: Int64) throws
}

extension RecordStore {
    /// The permanent id of a temporary one the server has mapped, when it is of `entity`.
    func permanentId(of entity: String, for temporaryId: Int64) throws -> Int64? {
        guard temporaryId < 0, let mapping = try temporaryIdMapping(temporaryId), mapping.entity == entity else { return nil }
        return mapping.id
    }

    /// The id a record is stored under now: for a temporary id, the one it was
    /// renamed to (and that one's permanent id once mapped), else its permanent id
    /// once mapped, else `id`.
    ///
    /// A rename comes first: the server may have mapped the old number to a record
    /// this device made in a copy of its file that was lost (see `ReusedSeqRepair`),
    /// while the app still means its own record.
    func currentId(of entity: String, _ id: Int64) throws -> Int64 {
        guard id < 0, try record(entity, id: id) == nil else { return id }
        // Renames always go down, so this ends.
        if let renamed = try renamedTemporaryId(entity, id), renamed < id { return try currentId(of: entity, renamed) }
        return try permanentId(of: entity, for: id) ?? id
    }
}
