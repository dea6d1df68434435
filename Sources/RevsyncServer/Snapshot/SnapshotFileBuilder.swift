import Logging
import PostgresNIO
import RevsyncRules
import RevsyncSnapshotFile
import RevsyncWire

/// Reads the dataset from PostgreSQL into a snapshot file (`RevsyncSnapshotFile`).
///
/// One REPEATABLE READ transaction, so every table is read at one instant and the
/// head read in it is exactly the revision of that state. Rows are read a page at a time
/// (by id) and written to the file, so the server's memory stays flat whatever the size.
/// Instances build one at a time: the transaction first takes a PostgreSQL advisory
/// lock, and an instance that waited for another may find, through `existing`, the
/// file that one built (a directory shared by the instances) and skip its own build.
struct SnapshotFileBuilder: Sendable {
    let database: Database
    let schema: DatasetSchema
    /// Rows read in one page, and handed to SQLite at once.
    var batchSize = 2_000

    /// The advisory lock's key: one build at a time per database, whatever the instance.
    static let lockKey: Int64 = 0x7265_7673_6E61_7031  // "revsnap1"

    enum Outcome: Sendable {
        /// The file at the path, of the database named (`SnapshotFileCatalog.databaseName`).
        case built(SnapshotFileMeta, database: String)
        /// Another instance built a file at or past the head this build would have read.
        case found(SnapshotFileCatalog.File)
    }

    var tables: [SnapshotTable] { schema.entities.map { SnapshotTable(name: $0.name, attributes: $0.attributes) } }

    /// Writes the file at `path` (which must not exist), unless `existing(head)` finds one.
    func build(at path: String, existing: @Sendable (_ database: String, _ head: Int64) -> SnapshotFileCatalog.File?) async throws -> Outcome {
        let logger = database.logger
        let schema = self.schema, batchSize = self.batchSize, tables = self.tables
        return try await database.streamingTransaction("REPEATABLE READ READ ONLY") { connection in
            try await connection.run("SELECT pg_advisory_xact_lock(\(Self.lockKey))", logger)
            let headRows = try await connection.rows("SELECT head, history::text FROM revsync_head", logger)
            guard let (head, history) = try headRows.first?.decode((Int64, String).self) else {
                throw StoreError.inconsistent("revsync_head has no row: the database is not migrated")
            }
            let database = SnapshotFileCatalog.databaseName(history)
            if let file = existing(database, head) { return .found(file) }
            let writer = try SnapshotFileWriter(path: path, tables: tables)
            for entity in schema.entities {
                let columns = RecordColumns(entity)
                // Rows decoded straight into the file's column order, without a dictionary a record.
                try await connection.forEachPage(
                    of: columns, size: batchSize, logger,
                    decode: { row in
                        let (id, revision, values) = try columns.values(of: row)
                        return SnapshotRow(id: id, revision: revision, values: values)
                    },
                    id: { $0.id }
                ) { page in
                    try await writer.append(page, to: entity.name)
                }
            }
            return .built(try await writer.finish(revision: head, schemaVersion: schema.version, history: history), database: database)
        }
    }
}
