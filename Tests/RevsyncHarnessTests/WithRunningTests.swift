import RevsyncHarness
import ServiceLifecycle
import Synchronization
import Testing

@Suite struct WithRunningTests {
    @Test func serviceRunsWhileTheBodyRunsAndIsCancelledWhenItReturns() async throws {
        let probe = Probe()
        let result = try await withRunning(ProbeService(probe: probe)) {
            try await probe.waitUntilStarted()
            #expect(!probe.stopped)
            return 42
        }
        #expect(result == 42)
        #expect(probe.stopped)
    }

    @Test func bodyErrorIsThrownAndTheServiceIsCancelled() async throws {
        let probe = Probe()
        await #expect(throws: BodyFailed.self) {
            try await withRunning(ProbeService(probe: probe)) {
                try await probe.waitUntilStarted()
                throw BodyFailed()
            }
        }
        #expect(probe.stopped)
    }
}

private struct BodyFailed: Error {}

/// What a `ProbeService` did: started, and stopped once cancelled.
private final class Probe: Sendable {
    private let startedFlag = Atomic<Bool>(false)
    private let stoppedFlag = Atomic<Bool>(false)

    var stopped: Bool { stoppedFlag.load(ordering: .sequentiallyConsistent) }

    func start() { startedFlag.store(true, ordering: .sequentiallyConsistent) }
    func stop() { stoppedFlag.store(true, ordering: .sequentiallyConsistent) }

    func waitUntilStarted() async throws {
        while !startedFlag.load(ordering: .sequentiallyConsistent) { try await Task.sleep(for: .milliseconds(5)) }
    }
}

/// Runs until cancelled, as a client's `run()` does.
private struct ProbeService: Service {
    let probe: Probe

    func run() async throws {
        probe.start()
        try? await Task.sleep(for: .seconds(3600))
        probe.stop()
    }
}
