import Foundation
import Logging
import PostgresNIO
import RevsyncServer

/// The soak's own PostgreSQL database, made fresh for every run next to the
/// database of the URL it was given, and the head revision read while it runs.
enum SoakDatabase {
    /// Drops and creates `name` on the PostgreSQL server of `url`; returns its URL.
    /// - Parameter ownRole: the database belongs to a login role of the same name, which the
    ///   URL returned connects as (with the password of `url`, if any): PostgreSQL's limits on
    ///   a role's connections, which the `postgres_refuses` fault sets, bind no superuser.
    static func recreate(_ name: String, nextTo url: String, ownRole: Bool = false, logger: Logger) async throws -> String {
        guard name.allSatisfy({ $0.isLowercase || $0.isNumber || $0 == "_" }), name.first?.isLetter == true else {
            throw SoakError("the soak database name \"\(name)\" must be lowercase letters, digits and _")
        }
        guard var components = URLComponents(string: url) else {
            throw SoakError("--database-url \"\(url)\" is not a URL like postgres://user@127.0.0.1:5432/db")
        }
        let password = components.password
        try await withClient(url: url, logger: logger) { client in
            let run = { (sql: String) in _ = try await client.query(PostgresQuery(unsafeSQL: sql), logger: logger).collect() }
            try await run("DROP DATABASE IF EXISTS \(name) WITH (FORCE)")
            guard ownRole else {
                try await run("CREATE DATABASE \(name)")
                return
            }
            let exists = try await client.query("SELECT 1 FROM pg_roles WHERE rolname = \(name)", logger: logger).collect()
            if exists.isEmpty {
                do {
                    try await run("CREATE ROLE \(name) LOGIN")
                } catch {
                    throw SoakError("the postgres-refuses fault needs a role of its own, and the user of --database-url cannot create one (it needs CREATEROLE): \(error)")
                }
            }
            // A run stopped during a refusal leaves the limit behind.
            try await run("ALTER ROLE \(name) LOGIN CONNECTION LIMIT -1")
            if let password { try await run("ALTER ROLE \(name) PASSWORD '\(password.replacingOccurrences(of: "'", with: "''"))'") }
            try await run("CREATE DATABASE \(name) OWNER \(name)")
        }
        if ownRole { components.user = name }
        components.path = "/" + name
        guard let soakURL = components.string else { throw SoakError("cannot build a URL for database \(name) from \(url)") }
        return soakURL
    }

    /// Runs `body` with a running client on `url`.
    static func withClient<T: Sendable>(
        url: String, logger: Logger, _ body: @Sendable (PostgresClient) async throws -> T
    ) async throws -> T {
        try await VerdictDatabase.withDatabase(url: url, logger: logger) { try await body($0.client) }
    }

    /// The database's history id (`revsync_head.history`), or nil when it cannot be read.
    static func history(_ client: PostgresClient, logger: Logger) async -> String? {
        await state(client, logger: logger)?.history
    }

    /// The server's head revision, or nil while PostgreSQL does not answer (e.g. it is restarting).
    static func head(_ client: PostgresClient, logger: Logger) async -> Int64? {
        await state(client, logger: logger)?.head
    }

    /// Both, read together; nil while PostgreSQL does not answer.
    static func state(_ client: PostgresClient, logger: Logger) async -> (head: Int64, history: String)? {
        do {
            let rows = try await client.query("SELECT head, history::text FROM revsync_head", logger: logger).collect()
            return try rows.first?.decode((Int64, String).self)
        } catch {
            return nil
        }
    }
}
