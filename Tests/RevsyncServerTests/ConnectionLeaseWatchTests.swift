import Logging
import PostgresNIO
import RevsyncTestSupport
import Testing
@testable import RevsyncServer

/// `ConnectionLeaseWatch` through `Database.withConnection`, with a timeout of 3 s (PostgreSQL
/// may be silent on a request's connection for 9 s): shorter ones are missed by leases when the
/// whole suite runs at once. The work here is slow on the server's side, not PostgreSQL's: what the watch
/// does is the same, and `StalledPostgresTests` stops a backend for real.
@Suite struct ConnectionLeaseWatchTests {
    static let logger = Logger(label: "revsync.tests.lease-watch")

    @Test func workStillUnderWayPastTheAnswerLimitHasItsConnectionClosedAndIsUnavailable() async throws {
        try await withServerDatabaseOfItsOwn(connections: 1, timeout: .seconds(3), logger: Self.logger) { database in
            let logger = Self.logger
            let error = await #expect(throws: StoreError.self) {
                try await database.withConnection { connection in
                    try await Task.sleep(for: .seconds(11))
                    try await connection.run("SELECT 1", logger)
                }
            }
            guard case .unavailable(let reason) = error else { Issue.record("\(String(describing: error))"); return }
            #expect(reason.contains("did not answer within 9.0 seconds"), "\(reason)")
            // The pool replaces the closed connection (in a few tries: a busy machine may take
            // longer than the timeout to open it).
            var value: Int?
            for _ in 0..<5 where value == nil {
                value = try? await database.withConnection { try await $0.rows("SELECT 2::int", logger).first?.decode(Int.self) }
            }
            #expect(value == 2)
        }
    }

    /// Work that PostgreSQL keeps answering is not cut, however long it runs: a large batch,
    /// statement after statement. (A first version cut every request's work three times the
    /// timeout after it began.)
    @Test func workPostgreSQLKeepsAnsweringIsNotCutHoweverLong() async throws {
        try await withServerDatabaseOfItsOwn(connections: 1, timeout: .seconds(3), logger: Self.logger) { database in
            let logger = Self.logger
            // 14 s of statements on one lease: past the 9 s at which that first version cut, and
            // past the watch's looks at 3, 6, 9 and 12 s. Cut, the loop's next statement throws.
            // (How many statements fit is not asserted: a loaded machine runs fewer.)
            let first = try await database.withConnection { connection in
                let started = ContinuousClock.now
                while ContinuousClock.now - started < .seconds(14) {
                    try await connection.run("SELECT pg_sleep(0.5)", logger)
                }
                return connection.id
            }
            let after = try await database.withConnection { $0.id }
            #expect(after == first, "the connection was closed under work PostgreSQL kept answering")
        }
    }

    /// Work that ends in time keeps its connection, however many leases there are; a
    /// snapshot's reads and migrations are not watched.
    @Test func workThatEndsInTimeAndUnwatchedWorkKeepTheirConnection() async throws {
        try await withServerDatabaseOfItsOwn(connections: 1, timeout: .seconds(3), logger: Self.logger) { database in
            let logger = Self.logger
            let first = try await database.withConnection { $0.id }
            // Their watches are due while the streaming read below runs on the same connection
            // (a pool of one): expired, they would close it under that read.
            for _ in 0..<200 { try await database.withConnection { try await $0.run("SELECT 1", logger) } }
            let streamed = try await database.streamingTransaction("READ COMMITTED") { connection in
                try await Task.sleep(for: .seconds(11))
                return try await connection.rows("SELECT 3::int", logger).first?.decode(Int.self)
            }
            #expect(streamed == 3)
            let unbounded = try await database.withConnection(limits: .unbounded) { connection in
                try await Task.sleep(for: .seconds(11))
                return connection.id
            }
            #expect(unbounded == first, "a connection was closed under work that was not watched, or had ended")
        }
    }
}
