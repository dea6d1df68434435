import Foundation
import Logging
import PostgresNIO
import RevsyncHarness
import RevsyncServer

/// A throwaway database per test, on the PostgreSQL that `Scripts/stack start` runs.
public enum TestDatabase {
    public static var serverURL: String {
        ProcessInfo.processInfo.environment["REVSYNC_TEST_DATABASE_URL"] ?? "postgres://revsync@127.0.0.1:54329/revsync"
    }

    static let logger = Logger(label: "revsync.tests.database")
    /// SQLSTATE 53300, "too many clients already".
    static let tooManyClients = "53300"

    /// The prefix of every test database's name; the name goes on with the second it was
    /// made (Unix time) and a random part.
    static let prefix = "revsync_test_"
    /// A test database older than this was left behind: no test runs this long.
    static let leftoverAge: TimeInterval = 3600

    /// Drops what earlier runs left behind, once per process and in the background: a run that
    /// crashed, a drop that failed, or a deferred drop the test process ended before. The stack's
    /// PostgreSQL had gathered 640 of them (5 GB) before this.
    private static let sweep: Task<Void, Never> = Task.detached(priority: .background) { await dropLeftovers() }

    /// Creates an empty database and returns its URL.
    public static func create() async throws -> String {
        try await create(template: nil)
    }

    /// Creates a database already migrated to the repository's default schema, with an instance
    /// id of its own, and returns its URL. It is a copy of one database per test process,
    /// migrated once: migrating a database for each of some 400 tests was a third of
    /// PostgreSQL's work while the suite ran (the DDL of its tables and indexes), and the
    /// suite's first 30 s held every core, long enough to fail tests that time themselves.
    public static func createMigrated() async throws -> String {
        let url = try await create(template: try await migratedTemplate.value)
        // The copy holds the template's instance uuid. Its cache keys would differ anyway (they
        // also carry the database's oid), but every database the tests make is a new one, and
        // should look like it.
        try await withConnection(to: url) { _ = try await column("UPDATE revsync_head SET instance = gen_random_uuid()", on: $0) }
        return url
    }

    /// The migrated database `createMigrated` copies. Named like every test database, so that
    /// the sweep of a later run drops it.
    private static let migratedTemplate = Task<String, any Error> {
        let url = try await create(template: nil)
        var settings = ServerSettings()
        settings.databaseURL = url
        settings.schemaPath = defaultSchemaPath
        settings.databaseConnections = 1
        settings.databaseTimeout = .seconds(60)
        let server = try Server(settings: settings, logger: logger)
        // Shut down gracefully: its connection is closed before the first copy, which
        // PostgreSQL refuses while anyone is connected to the template.
        _ = try await withRunning(server.postgresService) { try await server.migrator.migrate() }
        return String(try databaseName(url))
    }

    private static func create(template: String?) async throws -> String {
        _ = sweep
        let name = newName()
        try await onServer("CREATE DATABASE \(name)" + (template.map { " TEMPLATE \($0)" } ?? ""))
        return try url(of: name)
    }

    /// A name for a database or role of this run: the prefix, the second it was made, a random part.
    private static func newName() -> String {
        let random = UUID().uuidString.replacingOccurrences(of: "-", with: "").prefix(12).lowercased()
        return prefix + "\(Int(Date().timeIntervalSince1970))_" + random
    }

    /// Runs `body` with the URL of a new database, empty or `migrated` (`createMigrated`),
    /// dropped afterwards however `body` ends.
    public static func withNew<T>(migrated: Bool = false, _ body: (String) async throws -> T) async throws -> T {
        let url = try await migrated ? createMigrated() : create()
        return try await cleaningUp(with: { await drop(url) }) { try await body(url) }
    }

    /// Runs `body` with the URL of a new, empty database reached as a role of its own that may
    /// open at most `connectionLimit` connections at once (`createRole`); the role and the
    /// database are dropped afterwards however `body` ends.
    public static func withRole<T>(connectionLimit: Int, _ body: (String) async throws -> T) async throws -> T {
        try await withNew { database in
            let url = try await createRole(connectionLimit: connectionLimit, for: database)
            return try await cleaningUp(with: { await dropRole(url) }) { try await body(url) }
        }
    }

    /// `body`'s result, or its error, with `cleanUp` run after it either way.
    private static func cleaningUp<T>(with cleanUp: () async -> Void, _ body: () async throws -> T) async throws -> T {
        let result: T
        do {
            result = try await body()
        } catch {
            await cleanUp()
            throw error
        }
        await cleanUp()
        return result
    }

    /// Creates a login role that PostgreSQL lets open at most `connectionLimit` connections at
    /// once (past it: "too many connections for role", SQLSTATE 53300), and returns `url` with
    /// it as the user. Drop it with `dropRole(_:)` once its connections are closed.
    public static func createRole(connectionLimit: Int, for url: String) async throws -> String {
        _ = sweep
        let name = newName()
        try await onServer("CREATE ROLE \(name) LOGIN CONNECTION LIMIT \(connectionLimit)")
        var components = URLComponents(string: url)
        components?.user = name
        guard let url = components?.string else { throw TestSetupError("cannot build a URL from \(url)") }
        return url
    }

    /// Drops the role `url` connects as (made by `createRole`), and its database with it.
    public static func dropRole(_ url: String) async {
        await drop(url)
        guard let name = URLComponents(string: url)?.user, name.hasPrefix(prefix) else { return }
        try? await onServer("DROP ROLE IF EXISTS \(name)")
    }

    private static func url(of name: String) throws -> String {
        var components = URLComponents(string: serverURL)
        components?.path = "/" + name
        guard let url = components?.string else { throw TestSetupError("cannot build a URL from \(serverURL)") }
        return url
    }

    private static func databaseName(_ url: String) throws -> Substring {
        guard let name = URLComponents(string: url)?.path.dropFirst(), !name.isEmpty else {
            throw TestSetupError("no database name in \(url)")
        }
        return name
    }

    public static func drop(_ url: String) async {
        guard let name = URLComponents(string: url)?.path.dropFirst(), !name.isEmpty else { return }
        try? await onServer("DROP DATABASE IF EXISTS \(name) WITH (FORCE)")
    }

    /// Whether a test database named `name` was made more than `leftoverAge` before `now`. A
    /// name without its time (made before the names carried one) is a leftover too.
    static func isLeftover(_ name: String, now: Date) -> Bool {
        guard name.hasPrefix(prefix) else { return false }
        let parts = name.dropFirst(prefix.count).split(separator: "_")
        guard parts.count == 2, let made = TimeInterval(parts[0]) else { return true }
        return now.timeIntervalSince1970 - made > leftoverAge
    }

    /// On one connection: a sweep may have hundreds to drop. Roles after databases: a role
    /// cannot be dropped while it is connected.
    private static func dropLeftovers() async {
        try? await withConnection(to: serverURL) { connection in
            let names = try await column("SELECT datname FROM pg_database WHERE datname LIKE 'revsync\\_test\\_%'", on: connection)
            let now = Date()
            for name in names where isLeftover(name, now: now) {
                _ = try? await column("DROP DATABASE IF EXISTS \(name) WITH (FORCE)", on: connection)
            }
            let roles = try await column("SELECT rolname::text FROM pg_roles WHERE rolname LIKE 'revsync\\_test\\_%'", on: connection)
            for name in roles where isLeftover(name, now: now) {
                _ = try? await column("DROP ROLE IF EXISTS \(name)", on: connection)
            }
        }
    }

    /// The first column of `sql`'s rows, run on the server's own database (tests of this type).
    static func valuesOnServer(_ sql: String) async throws -> [String] {
        var values: [String] = []
        try await withConnection(to: serverURL) { values = try await column(sql, on: $0) }
        return values
    }

    /// Runs `sql` on the server's own database, on a connection of its own.
    private static func onServer(_ sql: String) async throws {
        try await withConnection(to: serverURL) { _ = try await column(sql, on: $0) }
    }

    /// The first column of each row `sql` returns, as text.
    private static func column(_ sql: String, on connection: PostgresConnection) async throws -> [String] {
        var column: [String] = []
        for try await row in try await connection.query(PostgresQuery(unsafeSQL: sql), logger: logger) {
            if let value = try? row.decode(String.self) { column.append(value) }
        }
        return column
    }

    /// Runs `body` with a connection to the database at `url`, closed before this returns.
    private static func withConnection(to url: String, _ body: (PostgresConnection) async throws -> Void) async throws {
        guard let components = URLComponents(string: url), let host = components.host else {
            throw TestSetupError("not a postgres:// URL: \(url) (REVSYNC_TEST_DATABASE_URL)")
        }
        let configuration = PostgresConnection.Configuration(
            host: host, port: components.port ?? 5432, username: components.user ?? "postgres",
            password: components.password, database: String(components.path.dropFirst()), tls: .disable)
        let connection: PostgresConnection
        var attempt = 0
        while true {
            do {
                connection = try await PostgresConnection.connect(configuration: configuration, id: 1, logger: logger)
                break
            } catch let error as PSQLError where error.serverInfo?[.sqlState] == tooManyClients && attempt < 20 {
                // While the whole suite runs, PostgreSQL turns connections away past
                // `max_connections` (over a thousand times in one run on the stack's log): a
                // drop that gave up then left its database behind, 24 a run.
                attempt += 1
                try? await Task.sleep(for: .milliseconds(50 * attempt))
            } catch let error as PSQLError where error.code == .connectionError && attempt < 3 {
                // A connect that timed out or was reset while the suite's start held both
                // cores (one test failed so in a fresh clone, with nothing refused in
                // PostgreSQL's log). A stack that is not running fails a second later than before.
                attempt += 1
                try? await Task.sleep(for: .milliseconds(200 * attempt))
            } catch {
                throw TestSetupError(
                    "the tests need PostgreSQL at \(serverURL) and cannot reach it (\(String(reflecting: error))). Start it with `Scripts/stack start`, or run the tests with `Scripts/test`.")
            }
        }
        do {
            try await body(connection)
        } catch {
            try? await connection.close()
            throw error
        }
        try? await connection.close()
    }
}

/// A test's environment is missing something; the message says how to provide it.
public struct TestSetupError: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}
