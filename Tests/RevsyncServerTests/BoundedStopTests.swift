import Logging
import ServiceLifecycle
import Synchronization
import Testing
@testable import RevsyncServer

/// `BoundedStop`: a service told to stop gets its time, and no more.
@Suite struct BoundedStopTests {
    static let logger = Logger(label: "revsync.tests.bounded-stop")

    @Test func aServiceThatStopsWhenCancelledStopsAndItsErrorIsThrown() async throws {
        let task = Task { try await BoundedStop(FailingWhenCancelled(), limit: .seconds(30), logger: Self.logger).run() }
        try await Task.sleep(for: .milliseconds(100))
        let cancelled = ContinuousClock.now
        task.cancel()
        await #expect(throws: CancelledService.self) { try await task.value }
        // It returned when the service did, not after the limit.
        #expect(ContinuousClock.now - cancelled < .seconds(20))
    }

    @Test func aServiceThatDoesNotStopIsLeftBehindAfterTheLimit() async throws {
        let stuck = Stuck()
        let task = Task { try await BoundedStop(stuck, limit: .milliseconds(300), logger: Self.logger).run() }
        try await Task.sleep(for: .milliseconds(100))
        task.cancel()
        try await task.value
        #expect(!stuck.ended, "it returned while the service still ran")
        stuck.release()
    }

    @Test func aGracefulShutdownTheServiceIgnoresIsBoundedToo() async throws {
        let stuck = Stuck()
        var configuration = ServiceGroupConfiguration(
            services: [.init(service: BoundedStop(stuck, limit: .milliseconds(300), logger: Self.logger))], logger: Self.logger)
        // Far longer than the limit: only `BoundedStop` can end the group's wait sooner.
        configuration.maximumGracefulShutdownDuration = .seconds(600)
        let group = ServiceGroup(configuration: configuration)
        let running = Task { try await group.run() }
        try await Task.sleep(for: .milliseconds(100))
        let told = ContinuousClock.now
        await group.triggerGracefulShutdown()
        try await running.value
        #expect(ContinuousClock.now - told < .seconds(60))
        #expect(!stuck.ended)
        stuck.release()
    }
}

private struct CancelledService: Error {}

/// Runs until cancelled, then throws.
private struct FailingWhenCancelled: Service {
    func run() async throws {
        while !Task.isCancelled { try? await Task.sleep(for: .milliseconds(10)) }
        throw CancelledService()
    }
}

/// Ignores cancellation and graceful shutdown: it ends only when the test releases it.
private final class Stuck: Service, Sendable {
    private let released = Atomic<Bool>(false)
    private let endedFlag = Atomic<Bool>(false)

    var ended: Bool { endedFlag.load(ordering: .sequentiallyConsistent) }

    func release() { released.store(true, ordering: .sequentiallyConsistent) }

    func run() async throws {
        while !released.load(ordering: .sequentiallyConsistent) {
            // A sleep that cancellation cannot cut short.
            await withCheckedContinuation { continuation in
                Task.detached {
                    try? await Task.sleep(for: .milliseconds(20))
                    continuation.resume()
                }
            }
        }
        endedFlag.store(true, ordering: .sequentiallyConsistent)
    }
}
