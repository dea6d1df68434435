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
        let query = { (name: String) in components.queryItems?.first { $0.name == name }?.value }
        let tls: PostgresClient.Configuration.TLS
        switch try Self.tls(query("sslmode") ?? "disable", rootCertificate: query("sslrootcert")) {
        case nil: tls = .disable
        case (required: false, let configuration)?: tls = .prefer(configuration)
        case (required: true, let configuration)?: tls = .require(configuration)
        }
        var configuration = PostgresClient.Configuration(
            host: host, port: components.port ?? 5432, username: user,
            password: components.password, database: database.isEmpty ? user : database, tls: tls)
        configuration.options.maximumConnections = connections
        configuration.options.connectTimeout = .seconds(3)
        // Timestamps are read and written in UTC regardless of the server's setting.
        configuration.options.additionalStartupParameters = [("TimeZone", "UTC"), ("application_name", query("application_name") ?? "revsync")]
        if let keepAlive = try keepAlive(text) {
            // The same keep-alive on PostgreSQL's end of each connection (its own settings,
            // PostgreSQL 12 or newer): a backend whose client's path died stops waiting for it
            // and ends, and a transaction it held open (locks, the revision row) rolls back,
            // rather than after the system's two hours.
            let serverSide = [
                ("tcp_keepalives_idle", keepAlive.idle), ("tcp_keepalives_interval", keepAlive.interval),
                ("tcp_keepalives_count", keepAlive.count), ("tcp_user_timeout", keepAlive.userTimeoutMilliseconds),
            ]
            configuration.options.additionalStartupParameters += serverSide.filter { $0.1 > 0 }.map { ($0.0, "\($0.1)") }
        }
        if let statementTimeout {
            // PostgreSQL cancels a statement (or a wait for a lock) that runs too long, and the
            // transaction rolls back: unlike a timer in the server, it cannot leave a COMMIT
            // that went through behind an error. Streaming reads and migrations lift it.
            let milliseconds = statementTimeout.components.seconds * 1000 + statementTimeout.components.attoseconds / 1_000_000_000_000_000
            // And it ends a session whose transaction waits twice as long for its next statement:
            // an instance frozen mid-transaction (stopped, its VM paused, starved of CPU), whose
            // kernel still answers keep-alive, would otherwise hold the revision row's lock, and
            // every writer of every instance would get 503, for as long as it stays frozen. Ours
            // send their statements back to back; a slow one is given twice the wait.
            configuration.options.additionalStartupParameters += [
                ("statement_timeout", "\(milliseconds)"), ("lock_timeout", "\(milliseconds)"),
                ("idle_in_transaction_session_timeout", "\(2 * milliseconds)"),
            ]
        }
        return configuration
    }

    /// The TCP keep-alive every connection gets (`TCPKeepAlive`), from the URL's libpq
    /// parameters; nil for `keepalives=0`.
    package static func keepAlive(_ text: String) throws -> TCPKeepAlive? {
        let items = URLComponents(string: text)?.queryItems ?? []
        return try TCPKeepAlive.from { name in items.first { $0.name == name }?.value }
    }

    /// TLS as libpq's `sslmode` means it: `allow` and `prefer` encrypt when the server can,
    /// `require` always, and neither checks the server's certificate (managed PostgreSQL
    /// services commonly present one of their own CA, and `require` is what their guides say);
    /// `verify-ca` checks it against the trusted roots, `verify-full` its host name too. With
    /// `sslrootcert` (a PEM file) those roots are the file's, not the system's, and `allow`,
    /// `prefer` and `require` check the chain as `verify-ca` does (as libpq does when it finds
    /// a root certificate).
    /// Nil for `disable`; `required`: whether a server without TLS is refused.
    static func tls(_ mode: String, rootCertificate: String?) throws -> (required: Bool, configuration: TLSConfiguration)? {
        var configuration = TLSConfiguration.makeClientConfiguration()
        if let rootCertificate {
            guard FileManager.default.isReadableFile(atPath: rootCertificate) else {
                throw SettingsError("sslrootcert in REVSYNC_DATABASE_URL names \"\(rootCertificate)\", which is not a readable file")
            }
            configuration.trustRoots = .file(rootCertificate)
        }
        switch mode {
        case "disable":
            return nil
        case "allow", "prefer", "require":
            configuration.certificateVerification = rootCertificate == nil ? .none : .noHostnameVerification
            return (mode == "require", configuration)
        case "verify-ca":
            configuration.certificateVerification = .noHostnameVerification
            return (true, configuration)
        case "verify-full":
            configuration.certificateVerification = .fullVerification
            return (true, configuration)
        default:
            throw SettingsError(
                "sslmode \"\(mode)\" in REVSYNC_DATABASE_URL is not one of disable, allow, prefer, require, verify-ca, verify-full")
        }
    }
}
