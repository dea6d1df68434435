import Foundation
import Logging
import RevsyncHarness
import RevsyncRedis

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A redis-server of a test's own on a free loopback port, for what must not touch the
/// shared server: FLUSHALL, SCRIPT FLUSH, and killing the server under a running client.
/// Not persistent (`--save ''`, no AOF), so nothing is left on disk.
/// Unchecked Sendable: a test starts and kills it from one task at a time; `process` is not touched concurrently.
public final class ThrowawayRedisServer: @unchecked Sendable {
    public let port: Int
    private var process: Process?

    public var configuration: RedisConfiguration {
        var configuration = RedisConfiguration(host: "127.0.0.1", port: port)
        configuration.connectTimeout = RedisConfiguration.testConnectTimeout
        return configuration
    }

    /// Starts a server and waits until it answers.
    public static func start() async throws -> ThrowawayRedisServer {
        let server = ThrowawayRedisServer(port: try FreePort.kernelChosenPort())
        try await server.start()
        return server
    }

    private init(port: Int) {
        self.port = port
    }

    deinit {
        kill()
    }

    /// (Re)starts the server on its port and waits until it answers PING.
    public func start() async throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = [
            "redis-server", "--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
            "--daemonize", "no", "--dir", FileManager.default.temporaryDirectory.path,
        ]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        do {
            try process.run()
        } catch {
            throw TestSetupError("cannot run redis-server (\(error)); install it with Scripts/setup")
        }
        self.process = process

        var probeConfiguration = configuration
        probeConfiguration.connectRetryDelay = .zero
        // Silent: its refused connects while the server starts are expected.
        let quiet = Logger(label: "redis-test-probe", factory: { _ in SwiftLogNoOpLogHandler() })
        // 30 s: with the whole suite starting on two cores, two servers once took more than 5.
        let allowed: Duration = .seconds(30)
        try await RedisClient.withClient(configuration: probeConfiguration, logger: quiet) { probe in
            let deadline = ContinuousClock.now + allowed
            while true {
                guard process.isRunning else {
                    throw TestSetupError("redis-server on port \(port) exited at once (status \(process.terminationStatus))")
                }
                do {
                    try await probe.ping()
                    return
                } catch where ContinuousClock.now < deadline {
                    try await Task.sleep(for: .milliseconds(20))
                } catch {
                    throw TestSetupError("redis-server on port \(port) did not answer PING within \(allowed): \(error)")
                }
            }
        }
    }

    /// Kills the server with SIGKILL, as a crash would, and waits until it is gone.
    public func kill() {
        guard let process, process.isRunning else { return }
        #if canImport(Glibc)
        _ = Glibc.kill(process.processIdentifier, SIGKILL)
        #elseif canImport(Darwin)
        _ = Darwin.kill(process.processIdentifier, SIGKILL)
        #endif
        process.waitUntilExit()
        self.process = nil
    }
}

extension RedisConfiguration {
    /// Tests connect with more time than production's 250 ms: with the whole suite on two
    /// cores, a connection to a Redis just restarted took longer, and a test failed with
    /// "Connection timed out after 0.25 seconds" (twice in a day's full runs).
    public static let testConnectTimeout: Duration = .seconds(2)
}
