import Foundation
import Logging
import PostgresNIO

#if canImport(Glibc)
import Glibc
#endif

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
                _ = try await connection.query(PostgresQuery(unsafeSQL: statement), logger: logger).collect()
            }
        }
    }

    static func value(on url: String, _ sql: String, logger: Logger) async throws -> String {
        try await withConnection(url, logger: logger) { connection in
            let rows = try await connection.query(PostgresQuery(unsafeSQL: sql), logger: logger).collect()
            return try rows.first?.decode(String.self) ?? ""
        }
    }
}

/// A loopback port nobody listens on right now.
enum FreePort {
    static func find() throws -> Int {
        let socketFD = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard socketFD >= 0 else { throw BenchError("socket() failed") }
        defer { close(socketFD) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = 0
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(socketFD, $0, length) == 0 && getsockname(socketFD, $0, &length) == 0
            }
        }
        guard bound else { throw BenchError("cannot bind a loopback port") }
        return Int(UInt16(bigEndian: address.sin_port))
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
