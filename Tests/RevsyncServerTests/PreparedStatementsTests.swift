import Foundation
import PostgresNIO
import Testing
@testable import RevsyncServer

/// The write path's statements prepared once per connection (`PreparedStatements`).
@Suite struct PreparedStatementsTests {
    /// A statement of its own text (the slots are shared by the whole process): `$1 · 2` and a label.
    static func doubling(_ value: Int64, label: String) -> PostgresQuery {
        var binds = PostgresBindings()
        binds.append(value)
        return PostgresQuery(unsafeSQL: "SELECT $1::bigint * 2, '\(label)'::text", binds: binds)
    }

    @Test func aStatementRunsPreparedOnItsConnectionWithTheRowsOfAnUnnamedOne() async throws {
        try await withTestServer { harness in
            let logger = harness.server.database.logger
            let label = "prepared \(UUID())"
            try await harness.server.postgres.withConnection { connection in
                for value in [1, 2, 3, 40] as [Int64] {
                    let rows = try await connection.preparedRows(Self.doubling(value, label: label), logger)
                    #expect(try rows.map { try $0.decode((Int64, String).self) }.map { "\($0.0) \($0.1)" } == ["\(value * 2) \(label)"])
                }
                let slot = try #require(PreparedStatements.slot(for: Self.doubling(0, label: label).sql, connection: connection.id))
                // PostgreSQL holds it under the slot's name, prepared once, with the text it was given.
                let held = try await connection.rows("SELECT statement FROM pg_prepared_statements WHERE name = \("revsync_slot_\(slot)")", logger)
                #expect(try held.map { try $0.decode(String.self) } == [Self.doubling(0, label: label).sql])
            }
        }
    }

    /// PostgresNIO keeps a failed preparation's error for the statement's name on that
    /// connection; a statement first prepared inside a failed transaction must still run
    /// once the transaction is rolled back.
    @Test func aPreparationThatFailedDoesNotFailTheStatementForeverOnItsConnection() async throws {
        try await withTestServer { harness in
            let logger = harness.server.database.logger
            let label = "failed once \(UUID())"
            try await harness.server.postgres.withConnection { connection in
                try await connection.run("BEGIN", logger)
                await #expect(throws: PSQLError.self) { try await connection.run("SELECT 1 / \(Int64(0))", logger) }
                // In the failed transaction even its preparation is refused (25P02).
                await #expect(throws: PSQLError.self) { try await connection.preparedRows(Self.doubling(5, label: label), logger) }
                try await connection.run("ROLLBACK", logger)
                for value in [5, 6] as [Int64] {
                    let rows = try await connection.preparedRows(Self.doubling(value, label: label), logger)
                    #expect(try rows.map { try $0.decode((Int64, String).self).0 } == [value * 2])
                }
            }
        }
    }
}
