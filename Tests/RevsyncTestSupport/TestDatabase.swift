import Foundation
import Logging
import PostgresNIO

/// A throwaway database per test, on the PostgreSQL that `Scripts/stack start` runs.
public enum TestDatabase {
    public static var serverURL: String {
        ProcessInfo.processInfo.environment["REVSYNC_TEST_DATABASE_URL"] ?? "postgres://revsync@127.0.0.1:54329/revsync"
    }

    static let logger = Logger(label: "revsync.tests.database")

    /// Creates an empty database and returns its URL.
    public static func create() async throws -> String {
        let name = "revsync_test_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").prefix(16).lowercased()
        try await onServer("CREATE DATABASE \(name)")
        var components = URLComponents(string: serverURL)
        components?.path = "/" + name
        guard let url = components?.string else { throw TestSetupError("cannot build a URL from \(serverURL)") }
        return url
    }

    public static func drop(_ url: String) async {
        guard let name = URLComponents(string: url)?.path.dropFirst(), !name.isEmpty else { return }
        try? await onServer("DROP DATABASE IF EXISTS \(name) WITH (FORCE)")
    }

    private static func onServer(_ sql: String) async throws {
        guard let components = URLComponents(string: serverURL), let host = components.host else {
            throw TestSetupError("REVSYNC_TEST_DATABASE_URL is not a postgres:// URL: \(serverURL)")
        }
        let configuration = PostgresConnection.Configuration(
            host: host, port: components.port ?? 5432, username: components.user ?? "postgres",
            password: components.password, database: String(components.path.dropFirst()), tls: .disable)
        let connection: PostgresConnection
        do {
            connection = try await PostgresConnection.connect(configuration: configuration, id: 1, logger: logger)
        } catch {
            throw TestSetupError(
                "the tests need PostgreSQL at \(serverURL) and cannot reach it (\(error)). Start it with `Scripts/stack start`, or run the tests with `Scripts/test`.")
        }
        defer { Task { try? await connection.close() } }
        _ = try await connection.query(PostgresQuery(unsafeSQL: sql), logger: logger).collect()
    }
}

/// A test's environment is missing something; the message says how to provide it.
public struct TestSetupError: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}
