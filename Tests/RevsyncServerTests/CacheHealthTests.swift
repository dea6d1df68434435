import Logging
import RevsyncRedis
import Testing
@testable import RevsyncServer

/// `CacheHealth`: while Redis is down, requests skip it and one background call per pause
/// probes it. (Pauses of 0.4 s: no wait between two calls here comes near that.)
@Suite struct CacheHealthTests {
    static func health(pause: Duration) -> CacheHealth {
        CacheHealth(pause: pause, logger: Logger(label: "revsync.tests.health"), metrics: ServerMetrics())
    }

    static let failure = RedisError.timeout(endpoint: "127.0.0.1:1", after: .seconds(2))

    @Test func everyCallTriesAWorkingRedis() {
        let health = Self.health(pause: .seconds(60))
        #expect((0..<5).allSatisfy { _ in health.mayTry() && health.isUp })
    }

    @Test func afterAFailureNoCallTriesUntilThePause() {
        let health = Self.health(pause: .seconds(60))
        health.failed(Self.failure)
        #expect(!health.mayTry())
        #expect(!health.mayTry())
        #expect(!health.isUp)
    }

    /// Requests never probe: only a success brings Redis back for them.
    @Test func requestsSkipRedisUntilAProbeSucceeds() async throws {
        let health = Self.health(pause: .milliseconds(400))
        health.failed(Self.failure)
        try await Task.sleep(for: .milliseconds(500))
        #expect(!health.isUp, "past the pause, but nothing has succeeded")
        #expect(health.mayTry())
        #expect(!health.isUp)
        health.succeeded()
        #expect(health.isUp)
    }

    /// A Redis that fails each call only at its timeout (a partition) would otherwise hold up
    /// every request that tried it after the pause.
    @Test func afterThePauseOneCallProbesAndTheOthersSkipUntilItSucceeds() async throws {
        let health = Self.health(pause: .milliseconds(400))
        health.failed(Self.failure)
        try await Task.sleep(for: .milliseconds(500))
        #expect(health.mayTry(), "the probe")
        #expect(!health.mayTry(), "a call while the probe is out")
        #expect(!health.mayTry())
        health.succeeded()
        #expect(health.mayTry() && health.mayTry(), "every call again once the probe succeeded")
    }

    @Test func aProbeThatFailsOrNeverReportsLetsAnotherThroughAfterThePause() async throws {
        let health = Self.health(pause: .milliseconds(400))
        health.failed(Self.failure)
        try await Task.sleep(for: .milliseconds(500))
        #expect(health.mayTry())
        health.failed(Self.failure)
        #expect(!health.mayTry())
        try await Task.sleep(for: .milliseconds(500))
        #expect(health.mayTry(), "after the failed probe's pause")
        // This probe never reports (its request was cancelled).
        #expect(!health.mayTry())
        try await Task.sleep(for: .milliseconds(500))
        #expect(health.mayTry(), "after the silent probe's pause")
    }
}
