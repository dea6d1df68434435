import Foundation
import GRDB
import Logging
import RevsyncSnapshotFile
import RevsyncWire

extension SyncEngine {
    /// Fetches the schema and a snapshot and loads them in one SQLite
    /// transaction; returns the snapshot's revision. The caller holds the sync slot.
    /// The SQLite snapshot file comes first (see `bootstrapFromFile`); the JSON
    /// snapshot when the server has none or the file is for another schema.
    /// - Parameter anyRevision: the server's database went back (`history_changed`): a file
    ///   below the device's revision is taken all the same, that revision being of another line.
    /// - Parameter fromFile: false loads the JSON snapshot whatever files the server has.
    @discardableResult
    func bootstrapLocked(token: String, anyRevision: Bool = false, fromFile: Bool = true) async throws -> Int64 {
        let layout = try await install(try await transport.schema(token: token))
        if fromFile, let loaded = try await bootstrapFromFile(token: token, layout: layout, anyRevision: anyRevision) {
            logger.info("bootstrapped from snapshot file", metadata: ["records": "\(loaded.records)", "maxRevision": "\(loaded.revision)"])
            changeBroadcaster.publish(ChangeEvent(origin: .bootstrap, records: RecordChanges()))
            configuration.revisionObserver?(loaded.revision)
            return loaded.revision
        }
        let snapshot = try await transport.snapshot(token: token)
        let unknown = layout.schema.unknownNames(in: snapshot)
        guard unknown.isEmpty else { throw DeviceError.unknownNamesInResponse(unknown) }
        let count = try await database.writer.write { db in
            try SnapshotLoader.load(snapshot, into: SQLiteRecordStore(db, layout: layout), schema: layout.schema)
        }
        logger.info("bootstrapped from snapshot", metadata: ["records": "\(count)", "maxRevision": "\(snapshot.maxRevision)"])
        changeBroadcaster.publish(ChangeEvent(origin: .bootstrap, records: RecordChanges()))
        configuration.revisionObserver?(snapshot.maxRevision)
        return snapshot.maxRevision
    }

    /// Creates the tables `document` needs (new entities and attributes are added
    /// to existing tables) and makes it the schema in use.
    func install(_ document: SchemaDocument) async throws -> SQLiteLayout {
        let schema = try LocalSchema(document)
        if let layout, layout.schema == schema { return layout }
        try await database.writer.write { db in
            try DeviceDatabase.ensureTables(for: schema, in: db)
            try StoredRegistration.writeSchema(document, in: db)
        }
        let layout = SQLiteLayout(schema: schema)
        self.layout = layout
        logger.debug("schema installed", metadata: ["version": "\(document.version)"])
        return layout
    }
}

extension SyncEngine {
    /// Downloads the server's SQLite snapshot next to the device's file, checks it
    /// (the server's SHA-256, `PRAGMA quick_check`, the schema version, every table's
    /// records) and loads it; nil when the JSON snapshot must be loaded instead (an
    /// in-memory engine, `sqliteSnapshots` off, a server without files, a file older
    /// than the device's records, or a file made for another schema). A download that fails or a file that does not check out
    /// throws a retryable error and leaves the device as it was; a cut download resumes.
    func bootstrapFromFile(token: String, layout: SQLiteLayout, anyRevision: Bool = false) async throws -> (revision: Int64, records: Int)? {
        guard configuration.sqliteSnapshots, let databasePath else { return nil }
        let target = databasePath + ".snapshot"
        let current = try await database.writer.read { db in try SQLiteRecordStore.readMeta(db) }
        // A re-bootstrap must not take the device back in time: a file older than its records is not used.
        let minimum = current.bootstrapped && !anyRevision ? current.maxRevision : 0
        guard let download = try await transport.snapshotFile(token: token, to: target, minimumRevision: minimum) else {
            logger.info("no SQLite snapshot at or past this device's revision; loading the JSON one", metadata: ["revision": "\(minimum)"])
            return nil
        }
        defer { try? FileManager.default.removeItem(atPath: target) }
        let version = layout.schema.document.version
        let meta: SnapshotFileMeta
        do {
            meta = try SnapshotFileCheck.check(path: target, tables: layout.snapshotTables, schemaVersion: version)
        } catch .otherSchema(let message) {
            logger.warning("the SQLite snapshot does not fit this device's schema; loading the JSON one", metadata: ["problem": "\(message)"])
            return nil
        } catch .corrupt(let message) {
            throw SyncTransportError.invalidResponse("the SQLite snapshot does not check out (\(message)); downloading it again")
        }
        guard meta.revision == download.revision else {
            throw SyncTransportError.invalidResponse(
                "the SQLite snapshot says revision \(meta.revision), its answer said \(download.revision); downloading it again")
        }
        let records = try await database.writer.writeWithoutTransaction { db in
            try SnapshotFileLoader.load(target, at: meta.revision, history: meta.history, lastSeq: download.lastSeq, layout: layout, into: db)
        }
        return (meta.revision, records)
    }
}
