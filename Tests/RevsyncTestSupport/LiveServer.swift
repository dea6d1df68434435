import Foundation
import Hummingbird
import Logging
import RevsyncHarness
import RevsyncServer
import Synchronization

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
/// with the Redis cache on (the stack's Redis, or REVSYNC_TEST_REDIS_URL). The server logs at
/// `warning` and up, to `logger` if given (`CapturedLog` reads what it logged).
public func withLiveServer<T: Sendable>(
    configure: (inout ServerSettings) -> Void = { _ in },
    logger given: Logger? = nil,
    _ body: @Sendable (LiveServer) async throws -> T
) async throws -> T {
    try await TestDatabase.withNew(migrated: true) { url in
        var settings = ServerSettings.forTests(databaseURL: url)
        settings.adminToken = "live-admin-token"
        // The kernel picks the port as the server binds it: a port picked before and bound later
        // could be taken meanwhile (by another test's server, or as some connection's source
        // port), and the test would then talk to whatever held it.
        settings.port = 0
        configure(&settings)
        var logger = given ?? Logger(label: "revsync.tests.live")
        logger.logLevel = .warning
        let server = try Server(settings: settings, logger: logger)
        let listening = ListeningPort()
        let app = server.buildApplication(onListening: { listening.set($0) })
        let adminToken = settings.adminToken ?? ""
        return try await withRunning(app) {
            let port = try await listening.wait()
            return try await body(
                LiveServer(baseURL: URL(string: "http://127.0.0.1:\(port)")!, adminToken: adminToken, server: server))
        }
    }
}

/// The port a server started on port 0 listens on, once it does.
public final class ListeningPort: Sendable {
    private let port = Mutex<Int?>(nil)

    public init() {}

    public func set(_ value: Int) { port.withLock { $0 = value } }

    /// Waits for the port. Migrations run first, and every suite runs at once on two cores: allow a minute.
    public func wait() async throws -> Int {
        let deadline = ContinuousClock.now + .seconds(60)
        while ContinuousClock.now < deadline {
            if let value = port.withLock({ $0 }) { return value }
            try await Task.sleep(for: .milliseconds(10))
        }
        throw TestSetupError("the server did not start listening within 60 s")
    }
}
