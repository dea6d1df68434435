import Logging
import PostgresNIO
import RevsyncTestSupport
import Testing
@testable import RevsyncServer

/// The server's pool while PostgreSQL refuses it more connections (its `max_connections`, or
/// the role's limit, reached by other clients).
@Suite struct RefusedConnectionsTests {
    static let logger: Logger = {
        var logger = Logger(label: "revsync.tests.refused")
        // The pool logs each refused attempt.
        logger.logLevel = .warning
        return logger
    }()

    /// PostgresNIO's pool queues every request while it fails to open a connection, even with
    /// connections of its own idle, and hands one out only when a connection comes back to it.
    /// With all of them idle nothing came back for 30 s (its default keep-alive): each request
    /// got 503 at the deadline, and one with no deadline (a snapshot's stream) waited on.
    @Test func whilePostgreSQLRefusesMoreConnectionsThePoolsOwnStillServeEveryRequest() async throws {
        try await TestDatabase.withRole(connectionLimit: 2) { url in try await Self.requestsWhileRefused(url) }
    }

    private static func requestsWhileRefused(_ url: String) async throws {
        // The server's own configuration of its client, with its default keep-alive (5 s): a
        // request may wait that long for an idle connection to come back, well inside 12 s.
        try await withServerDatabase(url, connections: 8, timeout: .seconds(12), logger: logger) { database in
            let hold = { @Sendable (requests: Int) async throws in
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for _ in 0..<requests {
                        group.addTask { try await database.withConnection { try await $0.run("SELECT pg_sleep(0.2)", logger) } }
                    }
                    try await group.waitForAll()
                }
            }
            // Eight at once: the pool opens the two connections the role may have. Then three
            // at once, with both open: the third asks for another and PostgreSQL refuses it,
            // which it goes on doing for as long as the pool holds its two.
            try await hold(8)
            try await hold(3)
            // Only idle connections now, and the pool still refused: each request, one after
            // another, must get one of them (a 503 past the deadline fails the test).
            let open = try await database.withConnection { connection in
                try await connection.rows("SELECT count(*) FROM pg_stat_activity WHERE usename = current_user", logger)
                    .map { try $0.decode(Int.self) }
            }
            #expect(open == [2], "the role's limit holds the pool to two connections")
            for _ in 0..<3 {
                try await Task.sleep(for: .milliseconds(200))
                try await database.withConnection { try await $0.run("SELECT 1", logger) }
            }
        }
    }
}
