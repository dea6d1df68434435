import Logging
import PostgresNIO
import RevsyncHarness
import RevsyncTestSupport
@testable import RevsyncServer

/// A `Database` on a client configured as the server configures its own
/// (`Server.postgresConfiguration`), running for `body`'s length and stopped as the server
/// stops it (`BoundedStop`).
func withServerDatabase(
    _ url: String, connections: Int, timeout: Duration, logger: Logger, _ body: (Database) async throws -> Void
) async throws {
    var settings = ServerSettings()
    settings.databaseURL = url
    settings.databaseConnections = connections
    settings.databaseTimeout = timeout
    let client = PostgresClient(configuration: try Server.postgresConfiguration(settings), backgroundLogger: logger)
    let database = Database(client: client, logger: logger, timeout: timeout)
    let running = BoundedStop(client, limit: .seconds(5), logger: logger)
    try await withThrowingTaskGroup(of: Void.self) { group in
        group.addTask { try await running.run() }
        try await running.start.wait()
        try await body(database)
        group.cancelAll()
    }
}

/// `withServerDatabase` on a new, empty test database, dropped afterwards.
func withServerDatabaseOfItsOwn(
    connections: Int, timeout: Duration, logger: Logger, _ body: (Database) async throws -> Void
) async throws {
    try await TestDatabase.withNew { url in
        try await withServerDatabase(url, connections: connections, timeout: timeout, logger: logger, body)
    }
}
