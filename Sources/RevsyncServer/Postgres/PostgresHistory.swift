import PostgresNIO
import RevsyncRules

/// The database's head and history id (`revsync_head.history`, `HistoryRules`).
package struct PostgresHistory: Sendable {
    let database: Database

    package init(database: Database) { self.database = database }

    /// `history_since` (of the table `alias`, if given) as whole microseconds since 1970, the
    /// form `HistorySince` decodes; NULL stays NULL. Every read of it goes through this.
    static func sinceMicroseconds(of alias: String? = nil) -> String {
        "(extract(epoch FROM \(alias.map { "\($0)." } ?? "")history_since) * 1000000)::bigint"
    }

    /// The head, the history id and when the id was set, read together (`history_since` as
    /// whole microseconds since 1970; NULL stays NULL).
    package func read() async throws -> (head: Int64, id: String, since: HistorySince) {
        let logger = database.logger
        let rows = try await database.withConnection { connection in
            try await connection.rows("SELECT head, history::text, \(unescaped: Self.sinceMicroseconds()) FROM revsync_head", logger)
        }
        guard let row = rows.first else { throw StoreError.inconsistent("revsync_head is empty: run `revsync migrate`") }
        let (head, id, since) = try row.decode((Int64, String, Int64?).self)
        return (head, id, HistorySince(microseconds: since))
    }

    /// A new id in place of `id`, unless the database holds another one already (another
    /// instance renewed `id` first, or an operator did): then that one, and `renewed` false.
    package func renew(from id: String) async throws -> (id: String, since: HistorySince, renewed: Bool) {
        let logger = database.logger
        let rows = try await database.withConnection { connection in
            try await connection.rows(
                """
                UPDATE revsync_head SET history = gen_random_uuid(), history_since = clock_timestamp()
                WHERE history::text = \(id) RETURNING history::text, \(unescaped: Self.sinceMicroseconds())
                """, logger)
        }
        if let (renewed, since) = try rows.first?.decode((String, Int64?).self) { return (renewed, HistorySince(microseconds: since), true) }
        let current = try await read()
        return (current.id, current.since, false)
    }
}
