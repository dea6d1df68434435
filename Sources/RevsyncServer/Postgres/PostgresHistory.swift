import PostgresNIO

/// The database's head and history id (`revsync_head.history`, `HistoryRules`).
package struct PostgresHistory: Sendable {
    let database: Database

    package init(database: Database) { self.database = database }

    /// The head and the history id, read together.
    package func read() async throws -> (head: Int64, id: String) {
        let logger = database.logger
        let rows = try await database.withConnection { connection in
            try await connection.rows("SELECT head, history::text FROM revsync_head", logger)
        }
        guard let row = rows.first else { throw StoreError.inconsistent("revsync_head is empty: run `revsync migrate`") }
        return try row.decode((Int64, String).self)
    }

    /// A new id in place of `id`, unless the database holds another one already (another
    /// instance renewed `id` first, or an operator did): then that one, and `renewed` false.
    package func renew(from id: String) async throws -> (id: String, renewed: Bool) {
        let logger = database.logger
        let rows = try await database.withConnection { connection in
            try await connection.rows(
                "UPDATE revsync_head SET history = gen_random_uuid() WHERE history::text = \(id) RETURNING history::text", logger)
        }
        if let renewed = try rows.first?.decode(String.self) { return (renewed, true) }
        return (try await read().id, false)
    }
}
