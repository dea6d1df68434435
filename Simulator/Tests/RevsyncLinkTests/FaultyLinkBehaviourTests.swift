import AsyncHTTPClient
import NIOCore
import RevsyncLink
import Synchronization
import Testing

/// Collects fates from the link's callback, which runs on event loops.
final class FateLog: Sendable {
    private let fates = Mutex<[RequestFate]>([])
    func append(_ fate: RequestFate) { self.fates.withLock { $0.append(fate) } }
    var all: [RequestFate] { self.fates.withLock { $0 } }
}

@Suite("FaultyLink behaviour")
struct FaultyLinkBehaviourTests {
    @Test func latencyAddsAtLeastTheConfiguredBaseEachWay() async throws {
        let profile = LinkProfile(
            upstreamLatency: .init(base: .milliseconds(150)),
            downstreamLatency: .init(base: .milliseconds(150))
        )
        try await withEchoServer { serverPort, _ in
            try await withLink(profile, serverPort: serverPort) { link in
                try await withClient { client in
                    let started = ContinuousClock.now
                    let answer = try await echo(client, port: link.port, "slowly")
                    #expect(answer == "slowly")
                    #expect(ContinuousClock.now - started >= .milliseconds(300))
                }
            }
        }
    }

    @Test func aLargeResponseTricklesOutAtTheCapInsteadOfArrivingWholeLate() async throws {
        // 120 kB at 40 kB/s: the head comes first, then the body over about three seconds, so a
        // device's read timeout (time without a byte) does not fire on a slow link.
        let profile = LinkProfile(bandwidth: 40_000)
        try await withEchoServer { serverPort, _ in
            try await withLink(profile, serverPort: serverPort) { link in
                var configuration = HTTPClient.Configuration()
                configuration.timeout = .init(connect: .seconds(10), read: .seconds(30))
                let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
                defer { _ = client.shutdown() }
                var request = HTTPClientRequest(url: "http://127.0.0.1:\(link.port)/echo")
                request.method = .POST
                request.body = .bytes(ByteBuffer(string: String(repeating: "p", count: 120_000)))
                let response = try await client.execute(request, timeout: .seconds(60))
                let headArrived = ContinuousClock.now
                let body = try await response.body.collect(upTo: 1 << 20)
                let bodyDone = ContinuousClock.now
                #expect(body.readableBytes == 120_000)
                #expect(bodyDone - headArrived >= .seconds(2), "the body arrived with the head: not paced")
            }
        }
    }

    @Test func bandwidthCapDelaysLargeBodies() async throws {
        // 4 kB at 10 kB/s is 400 ms each way.
        let profile = LinkProfile(bandwidth: 10_000)
        try await withEchoServer { serverPort, _ in
            try await withLink(profile, serverPort: serverPort) { link in
                try await withClient { client in
                    let body = String(repeating: "b", count: 4_000)
                    let started = ContinuousClock.now
                    // The delay is what is checked; the timeout only stops a hung request (CI runs every suite at once).
                    let answer = try await echo(client, port: link.port, body, timeout: .seconds(15))
                    #expect(answer == body)
                    #expect(ContinuousClock.now - started >= .milliseconds(800))
                }
            }
        }
    }

    @Test func goodProfilePassesFiftyRequestsCleanly() async throws {
        try await withEchoServer { serverPort, recorder in
            try await withLink(.good, serverPort: serverPort) { link in
                try await withClient { client in
                    for index in 0..<50 {
                        let answer = try await echo(client, port: link.port, "request \(index)")
                        #expect(answer == "request \(index)")
                    }
                }
                #expect(recorder.count == 50)
                #expect(link.stats().requests == 50)
                #expect(link.stats().injectedFaults == 0)
            }
        }
    }

    @Test func offlineLinkRefusesThenRecoversWhenBackOnline() async throws {
        try await withEchoServer { serverPort, recorder in
            try await withLink(.init(), serverPort: serverPort) { link in
                try await withClient { client in
                    let before = try await echo(client, port: link.port, "before")
                    #expect(before == "before")
                    link.setOffline(true)
                    #expect(link.isOffline)
                    await #expect(throws: (any Error).self) { try await echo(client, port: link.port, "during") }
                    link.setOffline(false)
                    let after = try await echo(client, port: link.port, "after")
                    #expect(after == "after")
                }
                #expect(recorder.all == ["before", "after"])
                #expect(link.stats().offlineRefusals + link.stats().offlineResets >= 1)
            }
        }
    }

    @Test func goingOfflineResetsOpenConnections() async throws {
        // The request sits in the link for thirty seconds, so going offline catches it in flight.
        let profile = LinkProfile(upstreamLatency: .init(base: .seconds(30)))
        try await withEchoServer { serverPort, recorder in
            try await withLink(profile, serverPort: serverPort) { link in
                try await withClient { client in
                    let answer = Task { try await echo(client, port: link.port, "in flight", timeout: .seconds(60)) }
                    // Go offline only once the link holds the request: on a loaded machine the
                    // client may still be connecting after any fixed pause.
                    let arrived = try await eventually(within: .seconds(20)) { link.stats().requests == 1 }
                    #expect(arrived, "the request never reached the link")
                    let wentOffline = ContinuousClock.now
                    link.setOffline(true)
                    await #expect(throws: (any Error).self) { try await answer.value }
                    #expect(ContinuousClock.now - wentOffline < .seconds(20), "the reset did not cut the delayed request short")
                }
                #expect(recorder.count == 0)
                #expect(link.stats().offlineResets == 1)
            }
        }
    }

    @Test func sameSeedGivesTheSameFaultSequence() async throws {
        let profile = LinkProfile(
            faults: .init(refuse: 0.1, resetMidRequest: 0.1, resetMidResponse: 0.1, dropAfterCommit: 0.1, duplicate: 0.1)
        )
        let runs = try await withEchoServer { serverPort, _ in
            var runs: [[RequestFate]] = []
            for _ in 0..<2 {
                let log = FateLog()
                try await withLink(profile, seed: 42, serverPort: serverPort, onFate: { log.append($0) }) { link in
                    try await withClient { client in
                        for index in 0..<30 {
                            _ = try? await echo(client, port: link.port, "request \(index)")
                        }
                    }
                }
                runs.append(log.all)
            }
            return runs
        }
        #expect(runs[0].count == 30)
        #expect(runs[0] == runs[1])
        #expect(Set(runs[0]).count >= 3, "30 draws at 50 % fault odds should show several fates")
    }

    @Test func offlineScheduleTakesTheLinkDownAndBringsItBack() async throws {
        let schedule = OfflineSchedule(
            online: .milliseconds(300) ... .milliseconds(300),
            offline: .milliseconds(600) ... .milliseconds(600)
        )
        try await withEchoServer { serverPort, _ in
            try await withLink(.init(offlineSchedule: schedule), serverPort: serverPort) { link in
                let wentDown = try await eventually { link.isOffline }
                #expect(wentDown, "the schedule never took the link down")
                let cameBack = try await eventually { !link.isOffline }
                #expect(cameBack, "the schedule never brought the link back")
            }
        }
    }
}

@Suite("Link profile")
struct LinkProfileTests {
    @Test func offlineWindowsReplayFromTheSeedAndStayInRange() {
        let schedule = LinkProfile.terrible.offlineSchedule ?? OfflineSchedule(online: .zero ... .zero, offline: .zero ... .zero)
        let first = schedule.windows(count: 5, seed: 7)
        let second = schedule.windows(count: 5, seed: 7)
        #expect(first.map(\.start) == second.map(\.start))
        #expect(first.map(\.length) == second.map(\.length))
        for window in first {
            #expect(schedule.offline.contains(window.length))
        }
    }

    @Test func presetsAreFoundByName() {
        #expect(LinkProfile.preset(named: "good") == .good)
        #expect(LinkProfile.preset(named: "wifi") == .wifi)
        #expect(LinkProfile.preset(named: "terrible") == .terrible)
        #expect(LinkProfile.preset(named: "dial-up") == nil)
    }

    @Test func generatorReplaysFromItsSeed() {
        var a = SplitMix64(seed: 99)
        var b = SplitMix64(seed: 99)
        #expect((0..<10).map { _ in a.next() } == (0..<10).map { _ in b.next() })
    }
}

/// Polls `condition` until it holds or a generous deadline passes, so a loaded machine cannot make a test flaky.
func eventually(within limit: Duration = .seconds(5), _ condition: () -> Bool) async throws -> Bool {
    let deadline = ContinuousClock.now + limit
    while ContinuousClock.now < deadline {
        if condition() { return true }
        try await Task.sleep(for: .milliseconds(10))
    }
    return false
}
