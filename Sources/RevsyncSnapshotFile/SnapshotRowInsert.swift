import GRDB
import GRDBSQLite
import RevsyncWire

/// A table's insert (or upsert) statement, run for one row at a time with its values bound by
/// SQLite's own calls.
///
/// GRDB's `StatementArguments` cost more than the inserts they bound: its initializers map the
/// values in unspecialized generic code (through a key path built anew at each call, or a boxed
/// value each), which took about a third of the server's CPU in a snapshot file's build, against
/// about 2 % for SQLite's own work, and a sixth of a device's loading a JSON snapshot. The
/// statement runs without GRDB's hooks around it (transaction observers, the schema cache), so
/// it is only for files nothing observes: the scratch file a `SnapshotFileWriter` fills, and a
/// device's own file, whose `DatabaseWriter` the engine keeps to itself.
public struct SnapshotRowInsert {
    private let statement: Statement
    private let handle: SQLiteStatement
    /// The statement's parameters: id, revision and one per attribute.
    private let parameters: Int

    public init(_ statement: Statement) {
        self.statement = statement
        self.handle = statement.sqliteStatement
        self.parameters = Int(sqlite3_bind_parameter_count(handle))
    }

    /// Inserts the row: its id, its revision, then its values in the table's attribute order.
    public func run(_ row: SnapshotRow) throws {
        // The previous run's outcome was checked when it ended; reset keeps nothing else.
        sqlite3_reset(handle)
        guard row.values.count + 2 == parameters else {
            throw DatabaseError(
                resultCode: .SQLITE_MISUSE,
                message: "a row of \(row.values.count + 2) values for a statement of \(parameters) parameters", sql: statement.sql)
        }
        try check(sqlite3_bind_int64(handle, 1, row.id))
        try check(sqlite3_bind_int64(handle, 2, row.revision))
        for (offset, value) in row.values.enumerated() {
            try bind(value, at: CInt(offset + 3))
        }
        let code = sqlite3_step(handle)
        guard code == SQLITE_DONE else { throw error(code) }
    }

    /// Binds as `JSONValue.databaseValue` converts: booleans as 0 and 1.
    private func bind(_ value: JSONValue, at index: CInt) throws {
        switch value {
        case .null, .unsupported: try check(sqlite3_bind_null(handle, index))
        case .bool(let flag): try check(sqlite3_bind_int64(handle, index, flag ? 1 : 0))
        case .integer(let number): try check(sqlite3_bind_int64(handle, index, number))
        case .double(let number): try check(sqlite3_bind_double(handle, index, number))
        case .string(let text):
            // SQLITE_TRANSIENT: SQLite copies the bytes before the call returns. The length, not
            // the terminating zero, ends the text (an empty one is text, not NULL).
            try text.withCString { pointer in
                try check(sqlite3_bind_text64(handle, index, pointer, sqlite3_uint64(text.utf8.count), Self.transient, UInt8(SQLITE_UTF8)))
            }
        }
    }

    private func check(_ code: CInt) throws {
        guard code == SQLITE_OK else { throw error(code) }
    }

    private func error(_ code: CInt) -> DatabaseError {
        DatabaseError(
            resultCode: ResultCode(rawValue: code), message: String(cString: sqlite3_errmsg(sqlite3_db_handle(handle))),
            sql: statement.sql)
    }

    /// SQLite's `SQLITE_TRANSIENT` destructor, which C defines as a cast of -1 that Swift does not import.
    private static let transient = unsafeBitCast(OpaquePointer(bitPattern: -1), to: sqlite3_destructor_type.self)
}
