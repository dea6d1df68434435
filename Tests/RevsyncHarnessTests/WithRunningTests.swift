import RevsyncHarness
import ServiceLifecycle
import Synchronization
import Testing

@Suite struct WithRunningTests {
    @Test func serviceRunsWhileTheBodyRunsAndIsShutDownGracefullyWhenItReturns() async throws {
        let probe = Probe()
        let result = try await withRunning(GracefulService(probe: probe)) {
            try await probe.waitUntilStarted()
            #expect(!probe.stopped)
            return 42
        }
        #expect(result == 42)
        #expect(probe.stopped)
        #expect(probe.sawGracefulShutdown)
        // A server cancelled instead can drop a connection it accepted and trap in SwiftNIO.
        #expect(!probe.wasCancelled)
    }

    @Test func bodyErrorIsThrownAndTheServiceIsShutDownGracefully() async throws {
        let probe = Probe()
        await #expect(throws: BodyFailed.self) {
            try await withRunning(GracefulService(probe: probe)) {
                try await probe.waitUntilStarted()
                throw BodyFailed()
            }
        }
        #expect(probe.stopped)
        #expect(probe.sawGracefulShutdown)
        #expect(!probe.wasCancelled)
    }

    @Test func aServiceThatIgnoresTheShutdownIsCancelledAfterTheGracePeriod() async throws {
        let probe = Probe()
        let started = ContinuousClock.now
        try await withRunning(StubbornService(probe: probe), gracePeriod: .milliseconds(200)) {
            try await probe.waitUntilStarted()
        }
        #expect(probe.stopped)
        #expect(probe.wasCancelled)
        // Bounded by the grace period, not by the service's hour-long sleep.
        #expect(ContinuousClock.now - started < .seconds(60))
    }

    @Test func theBodyRunsOnceAServiceThatAnnouncesItsStartHasBegun() async throws {
        // Late on purpose: without the wait the body would run first (PostgreSQL's client warns
        // of every lease made before its `run()`).
        let service = LateStarter(delay: .milliseconds(300))
        try await withRunning(service) {
            #expect(service.start.hasBegun)
        }
    }

    @Test func aServiceThatEndsBeforeAnnouncingItsStartLetsTheBodyRun() async throws {
        let result = try await withRunning(LateStarter(delay: nil)) { 7 }
        #expect(result == 7)
    }
}

private struct BodyFailed: Error {}
private struct NeverBegan: Error {}

/// Announces its start after `delay`, then runs until shut down; with no delay it fails
/// without announcing.
private struct LateStarter: AnnouncesStart {
    let delay: Duration?
    let start = ServiceStart()

    func run() async throws {
        guard let delay else { throw NeverBegan() }
        try await Task.sleep(for: delay)
        start.announce()
        try? await gracefulShutdown()
    }
}

/// What a probe service did: started, saw a graceful shutdown, was cancelled, stopped.
private final class Probe: Sendable {
    private let startedFlag = Atomic<Bool>(false)
    private let stoppedFlag = Atomic<Bool>(false)
    private let gracefulFlag = Atomic<Bool>(false)
    private let cancelledFlag = Atomic<Bool>(false)

    var stopped: Bool { stoppedFlag.load(ordering: .sequentiallyConsistent) }
    var sawGracefulShutdown: Bool { gracefulFlag.load(ordering: .sequentiallyConsistent) }
    var wasCancelled: Bool { cancelledFlag.load(ordering: .sequentiallyConsistent) }

    func start() { startedFlag.store(true, ordering: .sequentiallyConsistent) }
    func gracefulShutdown() { gracefulFlag.store(true, ordering: .sequentiallyConsistent) }
    func stop(cancelled: Bool) {
        cancelledFlag.store(cancelled, ordering: .sequentiallyConsistent)
        stoppedFlag.store(true, ordering: .sequentiallyConsistent)
    }

    func waitUntilStarted() async throws {
        while !startedFlag.load(ordering: .sequentiallyConsistent) { try await Task.sleep(for: .milliseconds(5)) }
    }
}

/// Runs until it is asked to shut down gracefully, as the server and the clients do.
private struct GracefulService: Service {
    let probe: Probe

    func run() async throws {
        let (shutdown, continuation) = AsyncStream.makeStream(of: Void.self)
        probe.start()
        await withGracefulShutdownHandler {
            for await _ in shutdown {}
        } onGracefulShutdown: {
            probe.gracefulShutdown()
            continuation.finish()
        }
        probe.stop(cancelled: Task.isCancelled)
    }
}

/// Ignores a graceful shutdown and runs until cancelled.
private struct StubbornService: Service {
    let probe: Probe

    func run() async throws {
        probe.start()
        try? await Task.sleep(for: .seconds(3600))
        probe.stop(cancelled: Task.isCancelled)
    }
}
