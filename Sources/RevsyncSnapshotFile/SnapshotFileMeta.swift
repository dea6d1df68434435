import Foundation
import GRDB

/// What a snapshot file says of itself, in its table `revsync_snapshot`: the
/// revision its records are at, the schema version they follow, and per table
/// the number of records and the totals of their ids and revisions, which the
/// device recomputes to check that every table arrived whole.
public struct SnapshotFileMeta: Sendable, Hashable, Codable {
    /// The layout of the file itself; a device refuses a format it does not know.
    public static let currentFormat = 1
    public static let table = "revsync_snapshot"

    public struct Totals: Sendable, Hashable, Codable {
        public var records: Int64
        /// `total(id)` and `total(revision)` as SQLite computes them.
        public var ids: Double
        public var revisions: Double

        public init(records: Int64, ids: Double, revisions: Double) {
            self.records = records
            self.ids = ids
            self.revisions = revisions
        }
    }

    public var format: Int
    public var revision: Int64
    public var schemaVersion: Int
    public var totals: [String: Totals]
    /// The database's history id the records are of (`SyncResponse.history`); nil in files of
    /// servers from before it.
    public var history: String?

    public init(
        format: Int = SnapshotFileMeta.currentFormat, revision: Int64, schemaVersion: Int, totals: [String: Totals], history: String? = nil
    ) {
        self.format = format
        self.revision = revision
        self.schemaVersion = schemaVersion
        self.totals = totals
        self.history = history
    }

    /// Records in every table.
    public var records: Int64 { totals.values.reduce(0) { $0 + $1.records } }

    /// The totals of `table` as the file holds it now.
    static func totals(of table: String, in db: Database) throws -> Totals {
        let row = try Row.fetchOne(
            db, sql: "SELECT count(*), total(\"id\"), total(\"revision\") FROM \(SnapshotTable.quote(table))")
        return Totals(records: row?[0] ?? 0, ids: row?[1] ?? 0, revisions: row?[2] ?? 0)
    }

    func write(in db: Database) throws {
        try db.execute(sql: "CREATE TABLE \(Self.table) (key TEXT PRIMARY KEY NOT NULL, value)")
        let insert = try db.makeStatement(sql: "INSERT INTO \(Self.table) (key, value) VALUES (?, ?)")
        try insert.execute(arguments: ["format", format])
        try insert.execute(arguments: ["revision", revision])
        try insert.execute(arguments: ["schema_version", schemaVersion])
        let encoded = String(decoding: try JSONEncoder().encode(totals), as: UTF8.self)
        try insert.execute(arguments: ["totals", encoded])
        if let history { try insert.execute(arguments: ["history", history]) }
    }

    /// Reads the table back; nil when the file has none or it is incomplete.
    static func read(in db: Database) throws -> SnapshotFileMeta? {
        guard try db.tableExists(table) else { return nil }
        var values: [String: DatabaseValue] = [:]
        for row in try Row.fetchAll(db, sql: "SELECT key, value FROM \(table)") {
            values[row[0]] = row[1] as DatabaseValue
        }
        guard let format = values["format"].flatMap(Int.fromDatabaseValue),
            let revision = values["revision"].flatMap(Int64.fromDatabaseValue),
            let schemaVersion = values["schema_version"].flatMap(Int.fromDatabaseValue),
            let totalsText = values["totals"].flatMap(String.fromDatabaseValue),
            let totals = try? JSONDecoder().decode([String: Totals].self, from: Data(totalsText.utf8))
        else { return nil }
        return SnapshotFileMeta(
            format: format, revision: revision, schemaVersion: schemaVersion, totals: totals,
            history: values["history"].flatMap(String.fromDatabaseValue))
    }
}
