import Foundation
import PostgresNIO
import Testing
@testable import RevsyncServer

/// A batch's transaction, opened by BEGIN queued ahead of its first statement (`PipelinedTransaction`).
@Suite struct PipelinedTransactionTests {
    @Test func theFirstStatementRunsInsideTheTransactionWithGenericPlansAndCommitEndsIt() async throws {
        try await withTestServer { harness in
            let logger = harness.server.database.logger
            try await harness.server.postgres.withConnection { connection in
                try await connection.run("CREATE TEMPORARY TABLE pipelined (n bigint)", logger)
                let transaction = PipelinedTransaction(on: connection, isolation: "READ COMMITTED", logger: logger)
                // Queued behind BEGIN, with nothing awaited in between.
                let inside = try await connection.rows("SELECT now() = statement_timestamp(), current_setting('plan_cache_mode')", logger)
                try await transaction.checkOpened()
                let (sameInstant, plans) = try #require(try inside.first?.decode((Bool, String).self))
                #expect(sameInstant == false, "now() is the transaction's start, earlier than the statement's: BEGIN came first")
                #expect(plans == "force_generic_plan")
                try await connection.run("INSERT INTO pipelined VALUES (1)", logger)
                try await transaction.commit()
                try await transaction.commitIfOpen()
                let after = try await connection.rows("SELECT current_setting('plan_cache_mode'), (SELECT count(*) FROM pipelined)", logger)
                let (setting, count) = try #require(try after.first?.decode((String, Int64).self))
                #expect(setting != "force_generic_plan", "SET LOCAL ends with the transaction")
                #expect(count == 1)
            }
        }
    }

    /// A statement whose error went unseen leaves the transaction aborted; PostgreSQL then
    /// answers COMMIT with ROLLBACK and no error, which must not pass for a commit.
    @Test func aCommitThatRolledBackThrows() async throws {
        try await withTestServer { harness in
            let logger = harness.server.database.logger
            try await harness.server.postgres.withConnection { connection in
                try await connection.run("CREATE TEMPORARY TABLE pipelined (n bigint)", logger)
                let transaction = PipelinedTransaction(on: connection, isolation: "READ COMMITTED", logger: logger)
                try await connection.run("INSERT INTO pipelined VALUES (1)", logger)
                try? await connection.run("SELECT 1 / \(Int64(0))", logger)
                await #expect(throws: StoreError.self) { try await transaction.commit() }
                let rows = try await connection.rows("SELECT count(*) FROM pipelined", logger)
                #expect(try rows.first?.decode(Int64.self) == 0)
            }
        }
    }
}
