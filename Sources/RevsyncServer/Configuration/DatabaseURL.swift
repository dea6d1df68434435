import Foundation
import PostgresNIO

/// Turns `postgres://user[:password]@host[:port]/database[?sslmode=…]` into a client configuration.
// `package`: the simulator's verdict connects with the same URL rules as the server.
package enum DatabaseURL {
    /// - Parameter statementTimeout: PostgreSQL's own `statement_timeout` and `lock_timeout`
    ///   on every connection; nil leaves the server's defaults.
    package static func configuration(_ text: String, connections: Int, statementTimeout: Duration? = nil) throws -> PostgresClient.Configuration {
        guard let components = URLComponents(string: text), ["postgres", "postgresql"].contains(components.scheme ?? ""),
            let host = components.host, !host.isEmpty
        else {
            throw SettingsError("REVSYNC_DATABASE_URL must look like postgres://user@host:port/database, not \"\(text)\"")
        }
        let user = components.user ?? "postgres"
        let database = components.path.hasPrefix("/") ? String(components.path.dropFirst()) : components.path
        let sslMode = components.queryItems?.first { $0.name == "sslmode" }?.value ?? "disable"
        let tls: PostgresClient.Configuration.TLS
        switch sslMode {
        case "disable": tls = .disable
        case "prefer", "allow": tls = .prefer(.makeClientConfiguration())
        case "require", "verify-ca", "verify-full": tls = .require(.makeClientConfiguration())
        default: throw SettingsError("sslmode \"\(sslMode)\" in REVSYNC_DATABASE_URL is not one of disable, prefer, require")
        }
        var configuration = PostgresClient.Configuration(
            host: host, port: components.port ?? 5432, username: user,
            password: components.password, database: database.isEmpty ? user : database, tls: tls)
        configuration.options.maximumConnections = connections
        configuration.options.connectTimeout = .seconds(3)
        // Timestamps are read and written in UTC regardless of the server's setting.
        configuration.options.additionalStartupParameters = [("TimeZone", "UTC")]
        if let statementTimeout {
            // PostgreSQL cancels a statement (or a wait for a lock) that runs too long, and the
            // transaction rolls back: unlike a timer in the server, it cannot leave a COMMIT
            // that went through behind an error. Streaming reads and migrations lift it.
            let milliseconds = "\(statementTimeout.components.seconds * 1000 + statementTimeout.components.attoseconds / 1_000_000_000_000_000)"
            configuration.options.additionalStartupParameters += [("statement_timeout", milliseconds), ("lock_timeout", milliseconds)]
        }
        return configuration
    }
}
