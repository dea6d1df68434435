import Foundation
import Logging
import PostgresNIO
import RevsyncServer

/// One-off SQL on a database URL, outside any server.
enum SQL {
    static func connect(_ url: String, logger: Logger) async throws -> PostgresConnection {
        guard let components = URLComponents(string: url), let host = components.host else { throw BenchError("bad database URL \(url)") }
        let configuration = PostgresConnection.Configuration(
            host: host, port: components.port ?? 5432, username: components.user ?? "postgres",
            password: components.password, database: String(components.path.dropFirst()), tls: .disable)
        return try await PostgresConnection.connect(configuration: configuration, id: 1, logger: logger)
    }

    /// Runs `body` on a new connection and closes it afterwards, whatever happens.
    static func withConnection<T>(_ url: String, logger: Logger, _ body: (PostgresConnection) async throws -> T) async throws -> T {
        let connection = try await connect(url, logger: logger)
        do {
            let result = try await body(connection)
            try await connection.close()
            return result
        } catch {
            try? await connection.close()
            throw error
        }
    }

    static func run(on url: String, _ sql: String, logger: Logger) async throws {
        try await withConnection(url, logger: logger) { connection in
            // Statements run one by one: the extended protocol takes one statement at a time.
            for statement in sql.split(separator: ";").map({ $0.trimmingCharacters(in: .whitespacesAndNewlines) }) where !statement.isEmpty {
                try await connection.run(PostgresQuery(unsafeSQL: statement), logger)
            }
        }
    }

    static func value(on url: String, _ sql: String, logger: Logger) async throws -> String {
        try await withConnection(url, logger: logger) { connection in
            let rows = try await connection.rows(PostgresQuery(unsafeSQL: sql), logger)
            return try rows.first?.decode(String.self) ?? ""
        }
    }

    /// `fsync=on, synchronous_commit=on` as a new session on `url` sees them. Either off would
    /// make every write figure, the floor's included, a measure of something no deployment runs.
    static func durability(on url: String, logger: Logger) async throws -> String {
        var settings: [String] = []
        for name in ["fsync", "synchronous_commit"] {
            let setting = try await value(on: url, "SHOW \(name)", logger: logger)
            guard setting != "off" else { throw BenchError("\(name) is off on \(url): the bench measures durable writes") }
            settings.append("\(name)=\(setting)")
        }
        return settings.joined(separator: ", ")
    }
}

/// What the figures were measured on.
enum Machine {
    static func describe() -> String {
        let cpuinfo = (try? String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8)) ?? ""
        let model = cpuinfo.split(separator: "\n").first { $0.hasPrefix("model name") }?.split(separator: ":").last?
            .trimmingCharacters(in: .whitespaces) ?? "unknown CPU"
        let memory = ProcessInfo.processInfo.physicalMemory / (1 << 30)
        return "\(ProcessInfo.processInfo.activeProcessorCount) cores (\(model)), \(memory) GiB, \(ProcessInfo.processInfo.operatingSystemVersionString)"
    }
}
