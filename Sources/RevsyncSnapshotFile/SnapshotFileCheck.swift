import GRDB
import RevsyncWire

/// Why a snapshot file cannot be loaded.
public enum SnapshotFileProblem: Error, Sendable, Hashable, CustomStringConvertible {
    /// Damaged, cut short or inconsistent: download it again.
    case corrupt(String)
    /// Sound, but made for another schema than the device's: load the JSON snapshot instead.
    case otherSchema(String)

    public var description: String {
        switch self {
        case .corrupt(let message): "the snapshot file is corrupt: \(message)"
        case .otherSchema(let message): "the snapshot file is for another schema: \(message)"
        }
    }
}

/// Checks a downloaded snapshot file before a device loads it: SQLite's
/// `PRAGMA quick_check`, the file's own description (`revsync_snapshot`: its
/// format, its schema version against the device's), every table and column the
/// device's schema needs, and each table's record count and id and revision totals
/// against what the server wrote. The file's bytes are checked before this, against
/// the digest the server sent.
public enum SnapshotFileCheck {
    public static func check(path: String, tables: [SnapshotTable], schemaVersion: Int) throws(SnapshotFileProblem) -> SnapshotFileMeta {
        let queue: DatabaseQueue
        do {
            var configuration = Configuration()
            configuration.readonly = true
            configuration.label = "revsync.snapshot-check"
            queue = try DatabaseQueue(path: path, configuration: configuration)
        } catch {
            throw .corrupt("it does not open as SQLite: \(error)")
        }
        defer { try? queue.close() }
        let outcome: Result<SnapshotFileMeta, SnapshotFileProblem>
        do {
            outcome = try queue.read { db in Self.check(db, tables: tables, schemaVersion: schemaVersion) }
        } catch {
            throw .corrupt("\(error)")
        }
        return try outcome.get()
    }

    private static func check(_ db: Database, tables: [SnapshotTable], schemaVersion: Int) -> Result<SnapshotFileMeta, SnapshotFileProblem> {
        do {
            let verdict = try String.fetchAll(db, sql: "PRAGMA quick_check")
            guard verdict == ["ok"] else { return .failure(.corrupt("quick_check: \(verdict.prefix(3).joined(separator: "; "))")) }
            guard let meta = try SnapshotFileMeta.read(in: db) else { return .failure(.corrupt("its revsync_snapshot table is missing or incomplete")) }
            guard meta.format == SnapshotFileMeta.currentFormat else {
                return .failure(.otherSchema("file format \(meta.format), this device reads \(SnapshotFileMeta.currentFormat)"))
            }
            guard meta.schemaVersion == schemaVersion else {
                return .failure(.otherSchema("schema version \(meta.schemaVersion), the device's is \(schemaVersion)"))
            }
            for table in tables {
                guard try db.tableExists(table.name) else { return .failure(.otherSchema("no table \(table.name)")) }
                let present = Set(try db.columns(in: table.name).map(\.name))
                if let missing = table.columns.first(where: { !present.contains($0) }) {
                    return .failure(.otherSchema("table \(table.name) has no column \(missing)"))
                }
                guard let expected = meta.totals[table.name] else { return .failure(.corrupt("no totals for table \(table.name)")) }
                let found = try SnapshotFileMeta.totals(of: table.name, in: db)
                guard found == expected else {
                    return .failure(.corrupt("table \(table.name) holds \(found.records) records (totals \(found.ids), \(found.revisions)), "
                        + "the server wrote \(expected.records) (\(expected.ids), \(expected.revisions))"))
                }
            }
            return .success(meta)
        } catch {
            return .failure(.corrupt("reading it failed: \(error)"))
        }
    }
}
