import GRDB
import Logging
import RevsyncWire

extension SyncEngine {
    /// Fetches the schema and a snapshot and loads them in one SQLite
    /// transaction; returns the snapshot's revision. The caller holds the sync slot.
    @discardableResult
    func bootstrapLocked(token: String) async throws -> Int64 {
        let layout = try await install(try await transport.schema(token: token))
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
