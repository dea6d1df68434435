import Foundation
import PostgresNIO

/// Turns `postgres://user[:password]@host[:port]/database[?sslmode=…]` into a client configuration.
// `package`: the simulator's verdict connects with the same URL rules as the server.
package enum DatabaseURL {
    package static func configuration(_ text: String, connections: Int) throws -> PostgresClient.Configuration {
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
        return configuration
    }
}
