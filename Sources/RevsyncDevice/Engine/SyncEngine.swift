import GRDB
import Logging
import RevsyncWire

/// The device engine: an offline-first local store that syncs with the Revsync
/// server over `POST /sync`.
///
/// ```swift
/// let engine = try SyncEngine(databasePath: path, transport: HTTPSyncTransport(configuration: .init(baseURL: url)))
/// if try await !engine.status().registered {
///     try await engine.register(DeviceRegistration(name: "ipad-7", user: "ana", role: "member"), adminToken: admin)
/// }
/// try await engine.syncOnce()                       // bootstraps a new device from /snapshot
/// let teamId = try await engine.transaction { tx in try tx.create("teams", ["league_id": 1, "name": "Owls"]) }
/// ```
///
/// Every local transaction and every applied response is one SQLite
/// transaction; pending change sets live in the same file, so the engine can be
/// killed at any point and reopened on the file without losing or repeating
/// anything. See docs/device.md.
public actor SyncEngine {
    let database: DeviceDatabase
    /// The SQLite file's path; nil for an in-memory database (which bootstraps from JSON).
    let databasePath: String?
    let transport: any SyncTransport
    let configuration: SyncEngineConfiguration
    var logger: Logger { configuration.logger }

    /// The entity tables' SQL; nil until a schema is installed (at bootstrap).
    var layout: SQLiteLayout?
    var token: String?
    var deviceId: String?

    let changeBroadcaster = Broadcaster<ChangeEvent>()
    let conflictBroadcaster = Broadcaster<ConflictNotification>()

    // One sync (or bootstrap) at a time: the rest wait their turn.
    var syncing = false
    var syncWaiters: [CheckedContinuation<Void, Never>] = []
    // `run()` sleeps until a local change or the poll interval.
    var wakeWaiters: [CheckedContinuation<Void, Never>] = []
    var wakePending = false
    /// The request of a long-poll in flight (`waitForServerChanges`), cancelled by a local
    /// change, by another caller wanting the sync slot and by `close()`.
    var longPoll: Task<SyncResponse, any Error>?
    /// Whether `longPoll` was cancelled for one of those reasons (not by its caller).
    var longPollInterrupted = false
    var closed = false

    /// What the server has handled for this device, as this engine instance last
    /// learned it (GET /devices/me, seq_reused); see SyncEngine+RestoredDevice.swift.
    var serverCounters: ServerCounters?
    /// Whether GET /devices/me has answered since the engine opened or adopted its token.
    var countersChecked = false
    /// Pending change sets with a seq at or below this are proven retries of what
    /// the server handled under their seqs (ReusedSeqSearch).
    var provenRetriesThrough: Int64 = 0

    /// Opens the engine on the SQLite file at `databasePath` (created if missing;
    /// nil for a throwaway in-memory database). Opening needs no network.
    public init(databasePath: String?, transport: any SyncTransport, configuration: SyncEngineConfiguration = .init()) throws {
        let database = try DeviceDatabase.open(path: databasePath)
        let info = try database.writer.read { try StoredRegistration.read($0) }
        self.database = database
        self.databasePath = databasePath
        self.transport = transport
        self.configuration = configuration
        self.token = info.token
        self.deviceId = info.deviceId
        self.layout = try info.schema.map { SQLiteLayout(schema: try LocalSchema($0)) }
    }

    // MARK: Registration

    /// Registers the device (`POST /devices` with the admin token) and keeps its token.
    @discardableResult
    public func register(_ registration: DeviceRegistration, adminToken: String) async throws -> RegisteredDevice {
        let device = try await transport.register(registration, adminToken: adminToken)
        try await storeToken(device.token, deviceId: device.deviceId)
        // A new device: the server has handled nothing of it, so there is nothing to ask.
        serverCounters = ServerCounters(lastSeq: 0, lowestTemporaryId: 0)
        countersChecked = true
        return device
    }

    /// Uses a token obtained elsewhere. It is stored in the database file.
    ///
    /// The engine then asks the server what it has already seen of the device
    /// (`GET /devices/me`) and moves its counters past it, so that a file older
    /// than the token's history (a reinstalled app given its old token, a restored
    /// backup) never numbers new edits like ones the server already has. Offline,
    /// the question waits for the next sync; an unknown token is thrown by the sync.
    public func useToken(_ token: String, deviceId: String? = nil) async throws {
        try checkOpen()
        try await storeToken(token, deviceId: deviceId)
        do {
            try await learnServerCounters(token: token)
        } catch SyncTransportError.unauthorized {
            logger.warning("the server does not know this token; the next sync will say so")
        }
    }

    private func storeToken(_ token: String, deviceId: String?) async throws {
        try checkOpen()
        try await database.writer.write { db in
            try StoredRegistration.write(MetaKey.token, token, in: db)
            try StoredRegistration.write(MetaKey.deviceId, deviceId, in: db)
        }
        self.token = token
        self.deviceId = deviceId
        // What was learned belongs to the previous token.
        serverCounters = nil
        countersChecked = false
        provenRetriesThrough = 0
    }

    /// Where the device stands.
    public func status() async throws -> DeviceStatus {
        try checkOpen()
        let layout = self.layout
        let (meta, pending) = try await database.writer.read { db in
            let meta = try SQLiteRecordStore.readMeta(db)
            let pending = try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM revsync_outbox") ?? 0
            return (meta, pending)
        }
        return DeviceStatus(
            registered: token != nil, deviceId: deviceId, bootstrapped: meta.bootstrapped && layout != nil,
            maxRevision: meta.maxRevision, pendingChangeSets: pending, schemaVersion: layout?.schema.version, history: meta.history)
    }

    /// The schema in use (nil before the first bootstrap).
    public var schema: LocalSchema? { layout?.schema }

    // MARK: Local edits

    /// Runs `body` as one local transaction and queues its edits as one change set.
    ///
    /// `body` runs on the database's writer, so it must be synchronous and
    /// quick; if it throws, nothing of it is kept. Returns what `body` returns
    /// (typically temporary ids of created records). A transaction of more than
    /// `maxOperationsPerChangeSet` creates, updates and deletes throws
    /// `DeviceError.tooManyOperations`, and one whose change set is more than
    /// `maxChangeSetBytes` bytes of JSON `DeviceError.changeSetTooManyBytes`; nothing of it is kept.
    @discardableResult
    public func transaction<Value: Sendable>(_ body: @Sendable (Transaction) throws -> Value) async throws -> Value {
        try checkOpen()
        let layout = try requireLayout()
        let schema = configuration.checksPermissionsLocally ? layout.schema : layout.schema.permittingEverything()
        let maxOperations = max(1, configuration.maxOperationsPerChangeSet)
        let maxBytes = max(1, configuration.maxChangeSetBytes)
        let result = try await database.writer.write { db in
            try LocalEdit.perform(on: SQLiteRecordStore(db, layout: layout), schema: schema, maxOperations: maxOperations, maxBytes: maxBytes, body)
        }
        if let seq = result.changeSet?.seq {
            changeBroadcaster.publish(ChangeEvent(origin: .local(seq: seq), records: result.changes))
            wake()
        }
        return result.value
    }

    // MARK: Reads

    /// A record as the device sees it now (pending local changes included). A
    /// temporary id the server has since replaced still finds the record.
    public func record(_ entity: String, id: Int64) async throws -> DeviceRecord? {
        try checkOpen()
        let layout = try requireLayout()
        return try await database.writer.read { db in
            let store = SQLiteRecordStore(db, layout: layout)
            _ = try layout.schema.entity(entity)
            return try store.record(entity, id: try store.currentId(of: entity, id))
        }
    }

    /// The records of `entity` that match `query`.
    public func records(_ entity: String, matching query: RecordQuery = .all) async throws -> [DeviceRecord] {
        try checkOpen()
        let layout = try requireLayout()
        return try await database.writer.read { db in
            let store = SQLiteRecordStore(db, layout: layout)
            return try store.records(entity, matching: try query.checked(for: entity, schema: layout.schema, store: store))
        }
    }

    /// The change sets not yet acknowledged or rejected, oldest first, as they will be sent.
    public func pendingChangeSets() async throws -> [ChangeSet] {
        try checkOpen()
        guard let layout else { return [] }
        return try await database.writer.read { db in
            try RequestBuilder.build(from: SQLiteRecordStore(db, layout: layout), schema: layout.schema).changeSets
        }
    }

    // MARK: Observing

    /// Every change of the local data from now on: local transactions, applied
    /// responses, bootstraps. Each call makes a new independent stream.
    public nonisolated func changes() -> AsyncStream<ChangeEvent> {
        changeBroadcaster.subscribe()
    }

    /// Rejected change sets from now on. They are also kept in the database
    /// until dismissed (`storedConflicts()`), so a crash right after a sync
    /// does not lose them.
    public nonisolated func conflicts() -> AsyncStream<ConflictNotification> {
        conflictBroadcaster.subscribe()
    }

    /// Conflict notifications received and not dismissed yet, oldest first.
    public func storedConflicts() async throws -> [ConflictNotification] {
        try checkOpen()
        let layout = try requireLayout()
        return try await database.writer.read { db in try SQLiteRecordStore(db, layout: layout).storedConflicts() }
    }

    /// Forgets stored conflict notifications up to and including `id`.
    public func dismissConflicts(through id: Int64) async throws {
        try checkOpen()
        let layout = try requireLayout()
        try await database.writer.write { db in try SQLiteRecordStore(db, layout: layout).dismissConflicts(through: id) }
    }

    // MARK: Closing

    /// Ends the streams and closes the database. The transport is the caller's to shut down.
    public func close() throws {
        guard !closed else { return }
        closed = true
        changeBroadcaster.finish()
        conflictBroadcaster.finish()
        wake()
        try database.writer.close()
    }

    // MARK: Helpers

    func checkOpen() throws(DeviceError) {
        if closed { throw .closed }
    }

    func requireLayout() throws(DeviceError) -> SQLiteLayout {
        guard let layout else { throw .notBootstrapped }
        return layout
    }

    func requireToken() throws(DeviceError) -> String {
        guard let token else { throw .notRegistered }
        return token
    }
}

/// Where a device stands (`SyncEngine.status()`).
public struct DeviceStatus: Sendable, Hashable {
    public var registered: Bool
    public var deviceId: String?
    /// Whether a snapshot was loaded: the device has data and a schema.
    public var bootstrapped: Bool
    public var maxRevision: Int64
    public var pendingChangeSets: Int
    public var schemaVersion: Int?
    /// The server database's history id the records are of (nil: none received yet).
    public var history: String? = nil
}
