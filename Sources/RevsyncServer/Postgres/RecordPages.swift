import Logging
import PostgresNIO
import RevsyncRules

extension PostgresConnection {
    /// Reads the table of `columns` a page of `size` rows at a time, in id order, each page
    /// read whole before `body` gets it. Both snapshots read tables this way: `body` writes
    /// to a file, and a row stream left waiting for its reader is what PostgresNIO 1.33.2
    /// stops the process on (a precondition) when PostgreSQL closes the connection, as a
    /// restart during a snapshot file's build did (docs/performance.md).
    func forEachPage(
        of columns: RecordColumns, size: Int, _ logger: Logger, _ body: ([StoredRecord]) async throws -> Void
    ) async throws {
        try await forEachPage(of: columns, size: size, logger, decode: columns.decode, id: { $0.id }, body)
    }

    /// The same, each row decoded by `decode` (whose `id` orders the pages).
    func forEachPage<Record>(
        of columns: RecordColumns, size: Int, _ logger: Logger, decode: (PostgresRow) throws -> Record, id: (Record) -> Int64,
        _ body: ([Record]) async throws -> Void
    ) async throws {
        var after = Int64.min
        while true {
            let rows = try await self.rows(
                "SELECT \(unescaped: columns.selectList) FROM \(unescaped: columns.table) AS t WHERE t.id > \(after) ORDER BY t.id LIMIT \(size)",
                logger)
            let page = try rows.map(decode)
            guard let last = page.last else { return }
            try await body(page)
            after = id(last)
            if page.count < size { return }
        }
    }
}
