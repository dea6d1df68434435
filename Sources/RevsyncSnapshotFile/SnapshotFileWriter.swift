import GRDB
import RevsyncWire

/// Writes a snapshot file: the entity tables of `SnapshotTable`, filled in batches
/// as the server reads its rows, then the reference indexes and `revsync_snapshot`.
///
/// The file is a scratch file until `finish()` returns: no journal and no syncs
/// while it fills (a crash leaves a file the caller deletes; nothing reads it
/// before it is complete and renamed into place).
public final class SnapshotFileWriter {
    public let path: String
    private let tables: [String: SnapshotTable]
    private let order: [SnapshotTable]
    private let queue: DatabaseQueue

    /// Creates the file at `path` (which must not exist) with one empty table per entity.
    public init(path: String, tables: [SnapshotTable]) throws {
        self.path = path
        self.order = tables
        self.tables = Dictionary(uniqueKeysWithValues: tables.map { ($0.name, $0) })
        var configuration = Configuration()
        configuration.label = "revsync.snapshot-file"
        configuration.prepareDatabase { db in
            try db.execute(sql: "PRAGMA journal_mode = OFF")
            try db.execute(sql: "PRAGMA synchronous = OFF")
        }
        queue = try DatabaseQueue(path: path, configuration: configuration)
        try queue.write { db in
            for table in tables { try db.execute(sql: table.createSQL) }
        }
    }

    /// Appends rows to `table`; each row's values are in `SnapshotTable.columns` order after id and revision.
    public func append(_ rows: [SnapshotRow], to table: String) async throws {
        guard let table = tables[table] else { throw SnapshotFileError.unknownTable(table) }
        try await queue.write { db in
            let insert = try SnapshotRowInsert(db.cachedStatement(sql: table.insertSQL))
            for row in rows { try insert.run(row) }
        }
    }

    /// Builds the indexes, writes `revsync_snapshot` and closes the file.
    @discardableResult
    /// - Parameter history: the database's history id the records are of (`HistoryRules`).
    public func finish(revision: Int64, schemaVersion: Int, history: String? = nil) async throws -> SnapshotFileMeta {
        let order = self.order
        let meta = try await queue.write { db in
            var totals: [String: SnapshotFileMeta.Totals] = [:]
            for table in order {
                for sql in table.indexSQL { try db.execute(sql: sql) }
                totals[table.name] = try SnapshotFileMeta.totals(of: table.name, in: db)
            }
            let meta = SnapshotFileMeta(revision: revision, schemaVersion: schemaVersion, totals: totals, history: history)
            try meta.write(in: db)
            return meta
        }
        try queue.close()
        return meta
    }
}

/// One record as a snapshot file stores it.
public struct SnapshotRow: Sendable {
    public var id: Int64
    public var revision: Int64
    /// The attributes' values in the table's attribute order.
    public var values: [JSONValue]

    public init(id: Int64, revision: Int64, values: [JSONValue]) {
        self.id = id
        self.revision = revision
        self.values = values
    }
}

public enum SnapshotFileError: Error, Sendable, Hashable, CustomStringConvertible {
    case unknownTable(String)

    public var description: String {
        switch self {
        case .unknownTable(let name): "the snapshot file has no table \(name)"
        }
    }
}
