import Foundation
import PostgresNIO
import Synchronization
import Testing
@testable import RevsyncServer

/// A batch's transaction, opened by BEGIN queued ahead of its first statement (`PipelinedTransaction`).
@Suite struct PipelinedTransactionTests {
    @Test func theFirstStatementRunsInsideTheTransactionAndCommitEndsIt() async throws {
        try await withTestServer { harness in
            let logger = harness.server.database.logger
            try await harness.server.postgres.withConnection { connection in
                try await connection.run("CREATE TEMPORARY TABLE pipelined (n bigint)", logger)
                let transaction = PipelinedTransaction(on: connection, isolation: "READ COMMITTED", logger: logger)
                // Queued behind BEGIN, with nothing awaited in between; now() is the transaction's start.
                let first = try await connection.rows("SELECT now()", logger)
                try await transaction.checkOpened()
                try await connection.run("INSERT INTO pipelined VALUES (1)", logger)
                let second = try await connection.rows("SELECT now()", logger)
                #expect(try first.first?.decode(Date.self) == second.first?.decode(Date.self), "both statements ran in BEGIN's transaction")
                try await transaction.commit()
                try await transaction.commitIfOpen()
                let after = try await connection.rows("SELECT now(), (SELECT count(*) FROM pipelined)", logger)
                let (afterStart, count) = try #require(try after.first?.decode((Date, Int64).self))
                #expect(try second.first?.decode(Date.self) != afterStart, "after COMMIT a statement is its own transaction again")
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

    /// A write transaction's awaits resume on the event loop of its connection, which read
    /// the answer, instead of waking a thread of the concurrency pool (`EventLoopTaskExecutor`).
    @Test func aWriteTransactionRunsOnItsConnectionsEventLoop() async throws {
        try await withTestServer { harness in
            let store = PostgresChangeSetStore(database: harness.server.database, schema: harness.server.schema)
            let onLoop = try await store.transaction { transaction in
                let connection = try #require(transaction as? PostgresApplyTransaction).connection
                var onLoop = [connection.eventLoop.inEventLoop]
                _ = try await transaction.lockDevices([], mappings: [:], allocating: [:])
                onLoop.append(connection.eventLoop.inEventLoop)
                _ = try await transaction.lowestTemporaryId(Device(id: 1, publicId: "p", name: "n", user: "u", role: "member"))
                onLoop.append(connection.eventLoop.inEventLoop)
                return onLoop
            }
            #expect(onLoop == [true, true, true])
        }
    }

    /// A batch that PostgreSQL ends with a deadlock every time is run `attempts` times in
    /// all, then answered `503` (nothing of it committed), not `500`.
    @Test func aBatchDeadlockedOnEveryRunIsUnavailableAfterItsAttempts() async throws {
        try await withTestServer { harness in
            let database = harness.server.database, logger = harness.server.database.logger
            // A real PostgreSQL error with the deadlock's SQLSTATE, raised on demand.
            let deadlock: any Error
            do {
                try await database.withConnection { connection in
                    try await connection.run("DO $$ BEGIN RAISE EXCEPTION 'a test deadlock' USING ERRCODE = 'deadlock_detected'; END $$", logger)
                }
                Issue.record("the DO block raised nothing")
                return
            } catch {
                deadlock = error
            }
            #expect(deadlock.sqlState == "40P01")
            let store = PostgresChangeSetStore(database: database, schema: harness.server.schema)
            let runs = Mutex(0)
            await #expect {
                try await store.transaction { _ in
                    runs.withLock { $0 += 1 }
                    throw deadlock
                }
            } throws: { error in
                guard case StoreError.unavailable(let message) = error else { return false }
                return message.contains("5 times in a row (deadlock)")
            }
            #expect(runs.withLock { $0 } == PostgresChangeSetStore.attempts)
        }
    }
}
