import Foundation
import Logging
import PostgresNIO
import RevsyncHarness
import RevsyncRules
import RevsyncServer

/// PostgreSQL as the verdict reads it: the server's schema, every entity's
/// records and the log, through one `PostgresClient` on the server's database.
public struct VerdictDatabase: Sendable {
    let client: PostgresClient
    let logger: Logger

    /// Runs `body` with a client on `url` (the server's `REVSYNC_DATABASE_URL` form),
    /// running the client while `body` runs.
    public static func withDatabase<T: Sendable>(
        url: String, logger: Logger = Logger(label: "revsync.sim.verdict"), _ body: (VerdictDatabase) async throws -> T
    ) async throws -> T {
        let client = PostgresClient(configuration: try DatabaseURL.configuration(url, connections: 2), backgroundLogger: logger)
        // Through `BoundedStop`: the body's first query waits for the client's start (no PostgresNIO warning).
        return try await withRunning(BoundedStop(client, limit: .seconds(5), logger: logger)) {
            try await body(VerdictDatabase(client: client, logger: logger))
        }
    }

    /// Uses a client the caller runs.
    public init(client: PostgresClient, logger: Logger = Logger(label: "revsync.sim.verdict")) {
        self.client = client
        self.logger = logger
    }

    /// Runs `body` in one REPEATABLE READ snapshot, so that the head, the log and
    /// every table are seen at the same instant.
    func inSnapshot<T: Sendable>(_ body: (PostgresConnection) async throws -> T) async throws -> T {
        let logger = self.logger
        return try await client.withConnection { connection in
            try await connection.inTransaction("REPEATABLE READ READ ONLY", logger, body)
        }
    }

    /// The newest dataset schema the server migrated the database to.
    static func schema(on connection: PostgresConnection, logger: Logger) async throws -> DatasetSchema {
        let rows = try await connection.query("SELECT version, document FROM revsync_schema ORDER BY version DESC LIMIT 1", logger: logger)
            .collect()
        guard let row = rows.first else {
            throw VerdictError("the database has no dataset schema in revsync_schema: has the server run its migrations?")
        }
        let (version, document) = try row.decode((Int, String).self)
        return try SchemaLoader.load(data: Data(document.utf8), file: "revsync_schema version \(version)")
    }
}
