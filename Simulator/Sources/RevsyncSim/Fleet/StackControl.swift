import Foundation
import Logging
import PostgresNIO
import RevsyncRedis

/// Server-side faults on the stack's services: empty Redis, restart Redis, restart PostgreSQL.
///
/// The restarts run commands (by default `Scripts/stack restart redis|postgres`) and return
/// once the service answers again (Redis PING, PostgreSQL `SELECT 1`).
public struct StackControl: Sendable {
    public var redisURL: String
    public var databaseURL: String
    /// Program and arguments that restart Redis.
    public var restartRedisCommand: [String]
    /// Program and arguments that restart PostgreSQL, keeping its data.
    public var restartPostgresCommand: [String]
    /// How long a restart command may run, and then how long the service may take to answer.
    public var timeout: Duration
    /// The restart commands' output is appended here; nil discards it.
    public var logPath: String?

    /// - Parameters:
    ///   - repositoryRoot: where `Scripts/stack` is, for the default restart commands.
    public init(
        repositoryRoot: String, redisURL: String, databaseURL: String, timeout: Duration = .seconds(60), logPath: String? = nil
    ) {
        let stack = URL(fileURLWithPath: repositoryRoot).appendingPathComponent("Scripts/stack").path
        self.redisURL = redisURL
        self.databaseURL = databaseURL
        self.restartRedisCommand = [stack, "restart", "redis"]
        self.restartPostgresCommand = [stack, "restart", "postgres"]
        self.timeout = timeout
        self.logPath = logPath
    }

    /// FLUSHALL: every key of the Redis server, the servers' cache included, is gone.
    public func flushRedis() async throws {
        let configuration = try RedisConfiguration(url: redisURL)
        do {
            try await RedisClient.withClient(configuration: configuration, logger: Self.quietLogger) { try await $0.flushAll() }
        } catch {
            throw FleetError("FLUSHALL on \(redisURL) failed: \(error)")
        }
    }

    /// Restarts Redis (empty afterwards) and waits until it answers PING.
    public func restartRedis() async throws {
        try await runCommand(restartRedisCommand, what: "Redis")
        try await waitUntilRedisAnswers()
    }

    /// Restarts PostgreSQL (data kept) and waits until it answers a query.
    public func restartPostgres() async throws {
        try await runCommand(restartPostgresCommand, what: "PostgreSQL")
        try await waitUntilPostgresAnswers()
    }

    public func waitUntilRedisAnswers() async throws {
        var configuration = try RedisConfiguration(url: redisURL)
        configuration.connectRetryDelay = .zero
        let deadline = ContinuousClock.now + timeout
        try await RedisClient.withClient(configuration: configuration, logger: Self.quietLogger) { client in
            while true {
                do {
                    try await client.ping()
                    return
                } catch where ContinuousClock.now < deadline {
                    try await Task.sleep(for: .milliseconds(50))
                } catch {
                    throw FleetError("Redis at \(redisURL) did not answer PING within \(timeout): \(error)")
                }
            }
        }
    }

    /// How many connections `role` has open now.
    public func connections(of role: String) async throws -> Int {
        let rows = try await onPostgres("SELECT count(*) FROM pg_stat_activity WHERE usename = '\(role)'")
        guard let count = try rows.first?.decode(Int.self) else { throw FleetError("pg_stat_activity gave no count for \(role)") }
        return count
    }

    /// Lets `role` open at most `limit` connections at once (nil: no limit). PostgreSQL refuses
    /// it more ("too many connections for role", 53300); those open stay. Superusers have no limit.
    public func limitConnections(of role: String, to limit: Int?) async throws {
        _ = try await onPostgres("ALTER ROLE \(role) CONNECTION LIMIT \(limit ?? -1)")
    }

    /// Runs `sql` on a connection of its own to `databaseURL` (the stack's superuser).
    private func onPostgres(_ sql: String) async throws -> [PostgresRow] {
        let configuration = try connectionConfiguration()
        let connection = try await PostgresConnection.connect(configuration: configuration, id: 1, logger: Self.quietLogger)
        do {
            let rows = try await connection.query(PostgresQuery(unsafeSQL: sql), logger: Self.quietLogger).collect()
            try await connection.close()
            return rows
        } catch {
            try? await connection.close()
            throw FleetError("\(sql) on \(databaseURL) failed: \(error)")
        }
    }

    /// A connection to `databaseURL`.
    private func connectionConfiguration() throws -> PostgresConnection.Configuration {
        guard let components = URLComponents(string: databaseURL), let host = components.host else {
            throw FleetError("not a postgres:// URL: \(databaseURL)")
        }
        let configuration = PostgresConnection.Configuration(
            host: host, port: components.port ?? 5432, username: components.user ?? "postgres", password: components.password,
            database: String(components.path.dropFirst()), tls: .disable)
        return configuration
    }

    public func waitUntilPostgresAnswers() async throws {
        let configuration = try connectionConfiguration()
        let deadline = ContinuousClock.now + timeout
        while true {
            do {
                let connection = try await PostgresConnection.connect(configuration: configuration, id: 1, logger: Self.quietLogger)
                do {
                    _ = try await connection.query("SELECT 1", logger: Self.quietLogger).collect()
                    try await connection.close()
                    return
                } catch {
                    try? await connection.close()
                    throw error
                }
            } catch where ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(100))
            } catch {
                throw FleetError("PostgreSQL at \(databaseURL) did not answer within \(timeout): \(error)")
            }
        }
    }

    private func runCommand(_ command: [String], what: String) async throws {
        guard !command.isEmpty else { throw FleetError("no command to restart \(what)") }
        // Without a log of the caller's, the output is kept only long enough to quote it in an error.
        let log = logPath ?? FileManager.default.temporaryDirectory.appendingPathComponent("revsync-sim-\(UUID().uuidString).log").path
        defer { if logPath == nil { try? FileManager.default.removeItem(atPath: log) } }
        let status = try await CommandRunner.run(command, environment: ProcessInfo.processInfo.environment, logPath: log, timeout: timeout)
        guard status == 0 else {
            throw FleetError(
                "restarting \(what) with `\(command.joined(separator: " "))` failed (exit status \(status)):\n\(LogTail.lastLines(of: log))")
        }
    }

    /// Refused connections while a service restarts are the point; nothing to log.
    private static let quietLogger = Logger(label: "revsync.sim.stack", factory: { _ in SwiftLogNoOpLogHandler() })
}
