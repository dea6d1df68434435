import Foundation
import Logging
import PostgresNIO
import RevsyncRules

/// Brings a database up to date: the server's tables, then the dataset schema.
///
/// Everything runs in one transaction under an advisory lock, so several server
/// instances starting together migrate once and a failed step changes nothing.
public struct Migrator: Sendable {
    let database: Database
    let schema: DatasetSchema
    /// The schema file's text, stored so later versions can be compared with it.
    let schemaDocument: String

    /// An arbitrary constant naming Revsync's migration lock.
    static let lockKey: Int64 = 0x5245_5653_594E_43

    public init(database: Database, schema: DatasetSchema, schemaDocument: String) {
        self.database = database
        self.schema = schema
        self.schemaDocument = schemaDocument
    }

    /// Returns a line per applied step (empty when already up to date).
    @discardableResult
    public func migrate() async throws -> [String] {
        let logger = database.logger
        let schema = self.schema, document = self.schemaDocument
        // No time limit: a migration may rewrite a large table, and another instance may hold the lock meanwhile.
        return try await database.transaction(limits: .unbounded) { connection in
            try await connection.run(Database.unlimitedTransaction(locks: true), logger)
            try await connection.run("SELECT pg_advisory_xact_lock(\(Self.lockKey))", logger)
            try await connection.run(
                "CREATE TABLE IF NOT EXISTS revsync_migrations (version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())",
                logger)
            var applied: Set<Int> = []
            for try await version in try await connection.query("SELECT version FROM revsync_migrations", logger: logger).decode(Int.self) {
                applied.insert(version)
            }
            var steps: [String] = []
            for migration in CoreMigrations.all where !applied.contains(migration.version) {
                for statement in migration.statements {
                    try await connection.run(PostgresQuery(unsafeSQL: statement), logger)
                }
                try await connection.run(
                    "INSERT INTO revsync_migrations (version, name) VALUES (\(migration.version), \(migration.name))", logger)
                steps.append("core \(migration.version): \(migration.name)")
            }
            steps += try await Self.migrateDataset(to: schema, document: document, on: connection, logger: logger)
            return steps
        }
    }

    private static func migrateDataset(
        to schema: DatasetSchema, document: String, on connection: PostgresConnection, logger: Logger
    ) async throws -> [String] {
        let rows = try await connection.rows("SELECT version, document FROM revsync_schema ORDER BY version DESC LIMIT 1", logger)
        var current: DatasetSchema? = nil
        if let row = rows.first {
            let (version, text) = try row.decode((Int, String).self)
            current = try SchemaLoader.load(data: Data(text.utf8), file: "the schema stored in the database (version \(version))")
        }
        let statements: [String]
        do {
            statements = try SchemaMigrationPlanner.plan(from: current, to: schema)
        } catch {
            throw SettingsError("cannot migrate the dataset schema from version \(current?.version ?? 0) to \(schema.version): \(error)")
        }
        for statement in statements {
            try await connection.run(PostgresQuery(unsafeSQL: statement), logger)
        }
        guard current?.version != schema.version else { return [] }
        try await connection.run("INSERT INTO revsync_schema (version, document) VALUES (\(schema.version), \(document))", logger)
        return ["dataset schema version \(schema.version): \(statements.count) statements"]
    }
}
