import Foundation
import GRDB
import RevsyncSnapshotFile
import RevsyncWire

/// The device's SQLite file: the bookkeeping tables (created by a migrator) and
/// one table per entity of the schema (created and extended from `GET /schema`).
///
/// Every write goes through one `write` call, which is one SQLite transaction:
/// a crash leaves either all of it or none of it.
struct DeviceDatabase: Sendable {
    let writer: any DatabaseWriter

    /// Opens (creating if needed) the file at `path`, or a private in-memory database for nil.
    static func open(path: String?) throws -> DeviceDatabase {
        var configuration = Configuration()
        configuration.label = "revsync.device"
        // Another connection to the file (a second engine after a restart) waits rather than failing.
        configuration.busyMode = .timeout(10)
        let writer: any DatabaseWriter
        if let path {
            // WAL: readers do not wait for the writer applying a large response.
            writer = try DatabasePool(path: path, configuration: configuration)
        } else {
            writer = try DatabaseQueue(configuration: configuration)
        }
        try migrator.migrate(writer)
        return DeviceDatabase(writer: writer)
    }

    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1 bookkeeping") { db in
            try db.execute(sql: """
                CREATE TABLE revsync_meta (key TEXT PRIMARY KEY NOT NULL, value);
                CREATE TABLE revsync_outbox (seq INTEGER PRIMARY KEY NOT NULL, change_set TEXT NOT NULL);
                CREATE TABLE revsync_temporary_ids (
                    temporary_id INTEGER PRIMARY KEY NOT NULL,
                    entity TEXT NOT NULL,
                    permanent_id INTEGER NOT NULL);
                CREATE TABLE revsync_conflicts (id INTEGER PRIMARY KEY AUTOINCREMENT, notification TEXT NOT NULL);
                """)
        }
        // A restored device's records renamed by ReusedSeqRepair: the old temporary ids keep finding them.
        migrator.registerMigration("v2 temporary id renames") { db in
            try db.execute(sql: """
                CREATE TABLE revsync_temporary_id_renames (
                    entity TEXT NOT NULL,
                    temporary_id INTEGER NOT NULL,
                    renamed_to INTEGER NOT NULL,
                    PRIMARY KEY (entity, temporary_id));
                """)
        }
        return migrator
    }

    /// Creates missing entity tables, columns and reference indexes for `schema`.
    /// Columns of attributes the schema dropped stay, unused.
    static func ensureTables(for schema: LocalSchema, in db: Database) throws {
        for entity in schema.entities {
            let table = SnapshotTable(name: entity.name, attributes: entity.attributes)
            if try !db.tableExists(entity.name) {
                try db.execute(sql: table.createSQL)
            } else {
                let existing = Set(try db.columns(in: entity.name).map(\.name))
                for attribute in entity.attributes where !existing.contains(attribute.name) {
                    try db.execute(sql: table.addColumnSQL(attribute))
                }
            }
            for sql in table.indexSQL { try db.execute(sql: sql) }
        }
    }
}

/// Values of `revsync_meta` beside the sync counters.
enum MetaKey {
    static let maxRevision = "maxRevision"
    static let nextSeq = "nextSeq"
    static let nextTemporaryId = "nextTemporaryId"
    static let bootstrapped = "bootstrapped"
    static let needsResync = "needsResync"
    static let history = "history"
    static let committedThrough = "committedThrough"
    static let schema = "schema"
    static let token = "token"
    static let deviceId = "deviceId"
}

/// Registration and schema, as stored. (Not RevsyncWire's `DeviceInfo`, the
/// server's answer to `GET /devices/me`.)
struct StoredRegistration: Sendable {
    var token: String?
    var deviceId: String?
    var schema: SchemaDocument?

    static func read(_ db: Database) throws -> StoredRegistration {
        let token = try String.fetchOne(db, sql: "SELECT value FROM revsync_meta WHERE key = ?", arguments: [MetaKey.token])
        let deviceId = try String.fetchOne(db, sql: "SELECT value FROM revsync_meta WHERE key = ?", arguments: [MetaKey.deviceId])
        let schemaText = try String.fetchOne(db, sql: "SELECT value FROM revsync_meta WHERE key = ?", arguments: [MetaKey.schema])
        let schema = try schemaText.map { try JSONDecoder().decode(SchemaDocument.self, from: Data($0.utf8)) }
        return StoredRegistration(token: token, deviceId: deviceId, schema: schema)
    }

    static func write(_ key: String, _ value: String?, in db: Database) throws {
        if let value {
            try db.execute(sql: "INSERT OR REPLACE INTO revsync_meta (key, value) VALUES (?, ?)", arguments: [key, value])
        } else {
            try db.execute(sql: "DELETE FROM revsync_meta WHERE key = ?", arguments: [key])
        }
    }

    static func writeSchema(_ schema: SchemaDocument, in db: Database) throws {
        let text = String(decoding: try JSONEncoder().encode(schema), as: UTF8.self)
        try write(MetaKey.schema, text, in: db)
    }
}
