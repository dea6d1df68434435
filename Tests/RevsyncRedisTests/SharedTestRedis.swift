import Foundation
import NIOCore
import RevsyncRedis
import RevsyncTestSupport
import Testing

/// The shared Redis the test run uses (Scripts/stack), with a random key prefix per test.
enum SharedTestRedis {
    static let defaultURL = "redis://127.0.0.1:63799"

    static func configuration() throws -> RedisConfiguration {
        let url = ProcessInfo.processInfo.environment["REVSYNC_TEST_REDIS_URL"].flatMap { $0.isEmpty ? nil : $0 } ?? defaultURL
        var configuration = try RedisConfiguration(url: url)
        configuration.connectTimeout = RedisConfiguration.testConnectTimeout
        // Not 2 s: these tests check what comes back, not how fast, and in the whole suite on two
        // cores three of them once failed together at 2 s (a connect's PING, a key clean-up)
        // while no command in Redis's slow log had taken 0.1 s. Tests of the timeout set their own.
        configuration.commandTimeout = .seconds(10)
        return configuration
    }

    /// Runs `body` with a client of the shared server; deletes the test's keys afterwards.
    /// Never flushes: other tests and people use the same server.
    static func withClient(
        configure: (inout RedisConfiguration) -> Void = { _ in },
        _ body: (RedisClient, TestKeys) async throws -> Void
    ) async throws {
        var configuration = try configuration()
        configure(&configuration)
        try await RedisClient.withClient(configuration: configuration) { client in
            do {
                try await client.ping()
            } catch let error as RedisError where error.isUnavailable {
                throw TestSetupError(
                    "Redis at \(configuration.url) is unreachable (\(error)): start it with Scripts/stack start or run Scripts/test"
                )
            }
            let keys = TestKeys()
            do {
                try await body(client, keys)
            } catch {
                try? await keys.deleteAll(using: client)
                throw error
            }
            try await keys.deleteAll(using: client)
        }
    }
}

/// Key names under a prefix of their own, so tests running at once never meet.
struct TestKeys: Sendable {
    let prefix = "revsync-test:\(UUID().uuidString.prefix(8)):"

    func callAsFunction(_ name: String) -> String { prefix + name }

    /// Deletes every key under the prefix (SCAN, not KEYS, to stay gentle on a shared server).
    func deleteAll(using client: RedisClient) async throws {
        var cursor = "0"
        repeat {
            let reply = try await client.command(["SCAN", cursor, "MATCH", prefix + "*", "COUNT", "1000"])
            guard let parts = reply.arrayValue, parts.count == 2, let next = parts[0].stringValue,
                let found = parts[1].arrayValue
            else { throw TestSetupError("unexpected SCAN reply \(reply)") }
            try await client.del(found.compactMap(\.stringValue))
            cursor = next
        } while cursor != "0"
    }
}


extension ByteBuffer {
    init(_ bytes: [UInt8]) {
        self = ByteBufferAllocator().buffer(capacity: bytes.count)
        writeBytes(bytes)
    }
}

/// Runs `body` and returns how long it took.
func elapsed(_ body: () async throws -> Void) async rethrows -> Duration {
    let clock = ContinuousClock()
    let start = clock.now
    try await body()
    return clock.now - start
}
