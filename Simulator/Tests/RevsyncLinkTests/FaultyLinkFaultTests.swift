import AsyncHTTPClient
import NIOCore
import RevsyncHarness
import RevsyncLink
import Synchronization
import Testing

@Suite("FaultyLink faults")
struct FaultyLinkFaultTests {
    /// A profile whose every request meets `fate`.
    static func always(_ fate: RequestFate, stall: Duration = .seconds(2)) -> LinkProfile {
        var odds = LinkProfile.FaultOdds()
        switch fate {
        case .pass: break
        case .refuse: odds.refuse = 1
        case .resetMidRequest: odds.resetMidRequest = 1
        case .resetMidResponse: odds.resetMidResponse = 1
        case .stall: odds.stall = 1
        case .dropAfterCommit: odds.dropAfterCommit = 1
        case .duplicate: odds.duplicate = 1
        case .split: odds.split = 1
        }
        return LinkProfile(faults: odds, stallDuration: stall)
    }

    @Test func refusedConnectionNeverReachesTheServer() async throws {
        try await withEchoServer { serverPort, recorder in
            try await withLink(Self.always(.refuse), serverPort: serverPort) { link in
                try await withClient { client in
                    await #expect(throws: (any Error).self) { try await echo(client, port: link.port, "hello") }
                }
                try await Task.sleep(for: .milliseconds(100))
                #expect(recorder.count == 0)
                #expect(link.stats().count(.refuse) == 1)
            }
        }
    }

    @Test func resetMidRequestFailsTheClientAndTheServerNeverHandlesIt() async throws {
        try await withEchoServer { serverPort, recorder in
            try await withLink(Self.always(.resetMidRequest), serverPort: serverPort) { link in
                try await withClient { client in
                    let body = String(repeating: "x", count: 4_000)
                    await #expect(throws: (any Error).self) { try await echo(client, port: link.port, body) }
                }
                try await Task.sleep(for: .milliseconds(100))
                #expect(recorder.count == 0)
                #expect(link.stats().count(.resetMidRequest) == 1)
            }
        }
    }

    @Test func resetMidResponseFailsTheClientAfterTheServerHandledIt() async throws {
        try await withEchoServer { serverPort, recorder in
            try await withLink(Self.always(.resetMidResponse), serverPort: serverPort) { link in
                try await withClient { client in
                    var request = HTTPClientRequest(url: "http://127.0.0.1:\(link.port)/echo")
                    request.method = .POST
                    request.body = .bytes(ByteBuffer(string: String(repeating: "y", count: 4_000)))
                    // The head arrives whole; the body is cut short by the close.
                    let response = try await client.execute(request, timeout: .seconds(2))
                    #expect(response.status == .ok)
                    await #expect(throws: (any Error).self) { try await response.body.collect(upTo: 1 << 20) }
                }
                #expect(recorder.count == 1)
                #expect(link.stats().count(.resetMidResponse) == 1)
            }
        }
    }

    @Test func droppedAfterCommitIsHandledByTheServerButFailsTheClient() async throws {
        try await withEchoServer { serverPort, recorder in
            try await withLink(Self.always(.dropAfterCommit), serverPort: serverPort) { link in
                try await withClient { client in
                    await #expect(throws: (any Error).self) { try await echo(client, port: link.port, "committed") }
                }
                #expect(recorder.all == ["committed"])
                #expect(link.stats().count(.dropAfterCommit) == 1)
            }
        }
    }

    @Test func duplicatedRequestReachesTheServerTwiceAndTheClientOnce() async throws {
        try await withEchoServer { serverPort, recorder in
            try await withLink(Self.always(.duplicate), serverPort: serverPort) { link in
                let answer = try await withClient { client in
                    try await echo(client, port: link.port, "twice")
                }
                #expect(answer == "twice")
                #expect(recorder.all == ["twice", "twice"])
                #expect(link.stats().count(.duplicate) == 1)
            }
        }
    }

    /// A split request reaches both servers at once; the client gets whichever answer came
    /// last, and the link reports both.
    @Test(arguments: [true, false])
    func splitRequestReachesBothServersAndTheClientGetsTheLaterAnswer(copyIsLater: Bool) async throws {
        let seen = Mutex<[SplitExchange]>([])
        try await withEchoServer(prefix: "own:", delay: copyIsLater ? .zero : .milliseconds(300)) { ownPort, own in
            try await withEchoServer(prefix: "other:", delay: copyIsLater ? .milliseconds(300) : .zero) { otherPort, other in
                try await withLink(
                    Self.always(.split), serverPort: ownPort, splitTargetPort: otherPort,
                    onSplit: { exchange in seen.withLock { $0.append(exchange) } }
                ) { link in
                    let answer = try await withClient { client in try await echo(client, port: link.port, "both") }
                    #expect(answer == (copyIsLater ? "other:both" : "own:both"))
                    #expect(own.all == ["both"])
                    #expect(other.all == ["both"])
                    #expect(link.stats().count(.split) == 1)
                }
            }
        }
        let exchanges = seen.withLock { $0 }
        #expect(exchanges.count == 1)
        #expect(exchanges.first.map { String(buffer: $0.requestBody) } == "both")
        let answers = exchanges.first?.answers.map { String(buffer: $0.body) }
        #expect(answers == (copyIsLater ? ["own:both", "other:both"] : ["other:both", "own:both"]))
    }

    @Test func splitWithoutAnotherInstancePasses() async throws {
        try await withEchoServer { serverPort, recorder in
            try await withLink(Self.always(.split), serverPort: serverPort) { link in
                let answer = try await withClient { client in try await echo(client, port: link.port, "once") }
                #expect(answer == "once")
                #expect(recorder.all == ["once"])
                #expect(link.stats().count(.split) == 0)
                #expect(link.stats().count(.pass) == 1)
            }
        }
    }

    @Test func splitWhoseOtherInstanceIsDownGetsItsOwnAnswer() async throws {
        let nobody = try FreePort.loopback(count: 1)[0]
        try await withEchoServer(prefix: "own:") { serverPort, recorder in
            try await withLink(Self.always(.split), serverPort: serverPort, splitTargetPort: nobody) { link in
                let answer = try await withClient { client in try await echo(client, port: link.port, "alone") }
                #expect(answer == "own:alone")
                #expect(recorder.all == ["alone"])
            }
        }
    }

    @Test func stallSurfacesAsTheClientsTimeout() async throws {
        // A stall far longer than the client's deadline: the client gives up at its deadline
        // instead of waiting the stall out. The deadline leaves a loaded machine time to connect.
        try await withEchoServer { serverPort, recorder in
            try await withLink(Self.always(.stall, stall: .seconds(60)), serverPort: serverPort) { link in
                let started = ContinuousClock.now
                try await withClient { client in
                    // The request's 2 s deadline fires before the client's read timeout (20 s);
                    // either is a client timeout.
                    let error = await #expect(throws: HTTPClientError.self) {
                        try await echo(client, port: link.port, "slow", timeout: .seconds(2))
                    }
                    #expect(error == .deadlineExceeded || error == .readTimeout, "not a client timeout: \(String(describing: error))")
                }
                #expect(ContinuousClock.now - started < .seconds(30))
                // The link forwards the request while it holds the answer; on a loaded machine the
                // server may finish reading it only after the client gave up.
                let handled = try await eventually(within: .seconds(20)) { recorder.count == 1 }
                #expect(handled, "the stalled request never reached the server")
                #expect(link.stats().count(.stall) == 1)
            }
        }
    }

    @Test func aHealedLinkPassesEveryRequestAndStaysOnline() async throws {
        try await withEchoServer { serverPort, recorder in
            try await withLink(Self.always(.resetMidRequest), serverPort: serverPort) { link in
                try await withClient { client in
                    await #expect(throws: (any Error).self) { try await echo(client, port: link.port, "broken") }
                    link.heal()
                    link.setOffline(true)
                    #expect(!link.isOffline, "a healed link ignores going offline")
                    for n in 0..<3 {
                        let answer = try await echo(client, port: link.port, "healed \(n)", timeout: .seconds(20))
                        #expect(answer == "healed \(n)")
                    }
                }
                #expect(link.isHealed)
                #expect(recorder.all == ["healed 0", "healed 1", "healed 2"])
                #expect(link.stats().count(.pass) == 3)
            }
        }
    }
}
