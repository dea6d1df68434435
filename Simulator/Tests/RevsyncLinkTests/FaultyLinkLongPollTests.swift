import RevsyncLink
import Synchronization
import Testing

/// A request the server holds (a device's long-poll) against the link: the link has
/// no timeout of its own, and its faults still fall on the answer.
@Suite("FaultyLink and held requests")
struct FaultyLinkLongPollTests {
    @Test(.timeLimit(.minutes(1)))
    func aRequestTheServerHoldsPassesWithItsLatencyAndBandwidth() async throws {
        let profile = LinkProfile(
            upstreamLatency: .init(base: .milliseconds(100)), downstreamLatency: .init(base: .milliseconds(100)), bandwidth: 20_000)
        try await withEchoServer { serverPort, recorder in
            try await withLink(profile, serverPort: serverPort) { link in
                let started = ContinuousClock.now
                let answer = try await held(link.port, String(repeating: "w", count: 2_000), milliseconds: 4_000)
                let took = ContinuousClock.now - started
                #expect(answer.count == 2_000)
                // 4 s held, 200 ms of latency, 2 × 100 ms at 20 kB/s.
                #expect(took >= .milliseconds(4_400))
                #expect(recorder.count == 1)
                #expect(link.stats().injectedFaults == 0)
            }
        }
    }

    @Test(.timeLimit(.minutes(1)))
    func aStallStillFallsOnTheAnswerOfAHeldRequest() async throws {
        let profile = LinkProfile(faults: .init(stall: 1), stallDuration: .seconds(1))
        try await withEchoServer { serverPort, recorder in
            try await withLink(profile, serverPort: serverPort) { link in
                let started = ContinuousClock.now
                await #expect(throws: (any Error).self) { try await held(link.port, "stalled", milliseconds: 2_000) }
                #expect(ContinuousClock.now - started >= .seconds(3), "held 2 s, then stalled 1 s before the close")
                #expect(recorder.count == 1)
            }
        }
    }

    @Test func theLinkSaysWhenItGoesOfflineAndComesBack() async throws {
        let changes = Mutex<[Bool]>([])
        try await withEchoServer { serverPort, _ in
            try await withLink(.init(), serverPort: serverPort, onOfflineChange: { offline in changes.withLock { $0.append(offline) } }) { link in
                link.setOffline(true)
                link.setOffline(true)
                link.setOffline(false)
                link.setOffline(true)
                link.heal()
                link.setOffline(true)
            }
        }
        #expect(changes.withLock { $0 } == [true, false, true, false], "changes only; a healed link stays online")
    }
}
