import GRDB
import RevsyncSnapshotFile

/// Loads a checked SQLite snapshot file (`SnapshotFileCheck`) into the device's file:
/// in one transaction every record is replaced by the file's, copied table by table
/// inside SQLite (`INSERT … SELECT` from the attached file, no row through Swift), then
/// the snapshot is settled as a JSON one is (`SnapshotLoader.settle`: the revision, the
/// outbox replayed on top). A failure rolls all of it back: the device stays as it was.
enum SnapshotFileLoader {
    static let attachedName = "revsync_snapshot_file"

    /// - Returns: the number of records loaded.
    /// - Parameter lastSeq: the device's last seq the server had handled (`SnapshotLoader.settle`).
    static func load(_ path: String, at revision: Int64, history: String?, lastSeq: Int64?, layout: SQLiteLayout, into db: Database) throws -> Int {
        // ATTACH cannot run inside a transaction.
        try db.execute(sql: "ATTACH DATABASE ? AS \(attachedName)", arguments: [path])
        defer { try? db.execute(sql: "DETACH DATABASE \(attachedName)") }
        var count = 0
        try db.inTransaction {
            let store = SQLiteRecordStore(db, layout: layout)
            try store.removeAllRecords()
            for table in layout.snapshotTables {
                let name = SnapshotTable.quote(table.name)
                let columns = table.columns.map(SnapshotTable.quote).joined(separator: ", ")
                try db.execute(sql: "INSERT INTO main.\(name) (\(columns)) SELECT \(columns) FROM \(attachedName).\(name)")
                count += db.changesCount
            }
            try SnapshotLoader.settle(store, at: revision, history: history, lastSeq: lastSeq, schema: layout.schema)
            return .commit
        }
        return count
    }
}
