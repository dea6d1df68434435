import Foundation
import Hummingbird
import Logging
import RevsyncHarness
import RevsyncServer

#if canImport(Glibc)
import Glibc
#endif

/// The repository's default schema, found from this file's path.
public let defaultSchemaPath = URL(fileURLWithPath: #filePath)
    .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    .appendingPathComponent("Config/schema.json").path

/// A server listening on a loopback port, on a database of its own.
public struct LiveServer: Sendable {
    /// `http://127.0.0.1:<port>`
    public let baseURL: URL
    public let adminToken: String
    public let server: Server
}

/// Runs `body` against a real server on a free loopback port and a fresh database,
/// with the Redis cache on (the stack's Redis, or REVSYNC_TEST_REDIS_URL).
public func withLiveServer<T: Sendable>(
    configure: (inout ServerSettings) -> Void = { _ in },
    _ body: @Sendable (LiveServer) async throws -> T
) async throws -> T {
    let url = try await TestDatabase.create()
    let port = try FreePort.kernelChosenPort()
    var settings = ServerSettings()
    settings.databaseURL = url
    settings.schemaPath = defaultSchemaPath
    settings.adminToken = "live-admin-token"
    settings.port = port
    settings.databaseConnections = 6
    // Every suite runs at once on two cores: PostgreSQL may take longer than production allows.
    settings.databaseTimeout = .seconds(30)
    settings.redisURL = ProcessInfo.processInfo.environment["REVSYNC_TEST_REDIS_URL"] ?? "redis://127.0.0.1:63799"
    configure(&settings)
    var logger = Logger(label: "revsync.tests.live")
    logger.logLevel = .warning
    do {
        let server = try Server(settings: settings, logger: logger)
        let app = server.buildApplication()
        let live = LiveServer(
            baseURL: URL(string: "http://127.0.0.1:\(port)")!, adminToken: settings.adminToken ?? "", server: server)
        let result = try await withRunning(app) {
            try await waitUntilListening(port: port)
            return try await body(live)
        }
        await TestDatabase.drop(url)
        return result
    } catch {
        await TestDatabase.drop(url)
        throw error
    }
}

/// Waits until something accepts TCP connections on the loopback port (the server
/// listens only after its migrations ran).
func waitUntilListening(port: Int) async throws {
    // Migrations run first, and every suite runs at once on two cores: allow a minute.
    let deadline = ContinuousClock.now + .seconds(60)
    while ContinuousClock.now < deadline {
        let socketFD = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(socketFD, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        }
        close(socketFD)
        if connected { return }
        try await Task.sleep(for: .milliseconds(50))
    }
    throw TestSetupError("the server on port \(port) did not start listening within 60 s")
}
