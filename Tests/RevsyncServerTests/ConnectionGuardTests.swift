import Foundation
import RevsyncTestSupport
import RevsyncWire
import Testing
@testable import RevsyncServer

/// Slow and idle clients are closed on time, and connections past the cap are refused: on a real socket.
@Suite(.timeLimit(.minutes(2))) struct ConnectionGuardTests {
    static func quick(_ settings: inout ServerSettings) {
        settings.connections.idleTimeout = .seconds(1)
        settings.connections.headerTimeout = .seconds(1)
        settings.connections.bodyTimeout = .seconds(1)
    }

    @Test func slowHeadersAreCutAtTheHeaderTimeout() async throws {
        try await withLiveServer(configure: Self.quick) { live in
            let port = try #require(live.baseURL.port)
            let connection = try RawConnection(port: port)
            let started = ContinuousClock.now
            connection.send("GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            // One more header line after half the timeout does not buy more time.
            try await Task.sleep(for: .milliseconds(500))
            connection.send("X-Slow: 1\r\n")
            // Bounds of seconds past the 1 s timeout: under the whole suite's load on a slow
            // machine the close came 3.4 s after the first byte. They still tell a cut from none.
            let (_, closed) = await connection.readUntilClosed(timeout: .seconds(10))
            #expect(closed)
            #expect(ContinuousClock.now - started < .seconds(8))
        }
    }

    @Test func idleConnectionsAreClosed() async throws {
        try await withLiveServer(configure: Self.quick) { live in
            let connection = try RawConnection(port: try #require(live.baseURL.port))
            let (_, closed) = await connection.readUntilClosed(timeout: .seconds(5))
            #expect(closed)
        }
    }

    @Test func slowBodiesAreCutAtTheBodyTimeout() async throws {
        try await withLiveServer(configure: Self.quick) { live in
            let connection = try RawConnection(port: try #require(live.baseURL.port))
            connection.send("POST /sync HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"maxRev")
            let started = ContinuousClock.now
            let (_, closed) = await connection.readUntilClosed(timeout: .seconds(10))
            #expect(closed)
            #expect(ContinuousClock.now - started < .seconds(8))
        }
    }

    @Test func aBodyCutShortIsNotCountedAsAServerError() async throws {
        try await withLiveServer(configure: Self.quick) { live in
            let (_, token) = try await live.server.devices.register(name: "slow", user: "slow", role: "member")
            let connection = try RawConnection(port: try #require(live.baseURL.port))
            connection.send("POST /sync HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \(token)\r\nContent-Length: 1000\r\n\r\n{\"max")
            let (_, cut) = await connection.readUntilClosed(timeout: .seconds(5))
            #expect(cut)
            try await Task.sleep(for: .milliseconds(200))
            #expect(!live.server.metrics.exposition().contains(#"status="500""#))
        }
    }

    @Test func aKeptAliveConnectionServesRequestsWithinTheTimeouts() async throws {
        try await withLiveServer(configure: Self.quick) { live in
            let connection = try RawConnection(port: try #require(live.baseURL.port))
            for _ in 0..<3 {
                connection.send("GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
                let (text, _) = await connection.readUntilClosed(timeout: .seconds(5), orUntil: "}")
                #expect(text.hasPrefix("HTTP/1.1 200"))
            }
        }
    }

    /// A request pipelined behind another (both sent in one write, before the first answer)
    /// is under way once the first is answered: its wait of 3 s runs whole, past the idle
    /// timeout of 1 s, and the connection goes idle only after its answer.
    @Test func aPipelinedRequestIsNotCutAtTheIdleTimeout() async throws {
        try await withLiveServer(configure: Self.quick) { live in
            let (_, token) = try await live.server.devices.register(name: "pipelined", user: "pipelined", role: "viewer")
            let connection = try RawConnection(port: try #require(live.baseURL.port))
            let started = ContinuousClock.now
            connection.send("GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n" + LongPollConnectionTests.request(token: token, wait: 3))
            let (text, closed) = await connection.readUntilClosed(timeout: .seconds(20))
            let answers = text.components(separatedBy: "HTTP/1.1 200").count - 1
            #expect(answers == 2, "the waiting request was cut: \(text)")
            #expect(ContinuousClock.now - started >= .seconds(3))
            #expect(closed, "the connection was not closed at its idle timeout after the second answer")
        }
    }

    /// A request pipelined behind one that says `Connection: close` is never answered (the
    /// server half-closes after the first answer). It must not count as under way, or a client
    /// that never closes would hold its place for good: NIO's parser (llhttp) takes no request
    /// after a `Connection: close`, so the second head is never decoded, the first answer ends
    /// the last request under way, and the idle timeout closes the connection.
    @Test func aRequestPipelinedBehindAConnectionCloseDoesNotHoldTheConnection() async throws {
        try await withLiveServer(configure: { Self.quick(&$0); $0.connections.maxConnections = 1 }) { live in
            let port = try #require(live.baseURL.port)
            let connection = try RawConnection(port: port)
            connection.send(
                "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\nGET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            let (first, _) = await connection.readUntilClosed(timeout: .seconds(10), orUntil: "}")
            #expect(first.hasPrefix("HTTP/1.1 200"), "\(first)")
            // The server's half-close looks like the end of the stream from here, whether it then
            // closes the socket or not; with a cap of one connection, the next one is served only
            // once it has.
            let started = ContinuousClock.now
            var served = false
            while !served && ContinuousClock.now - started < .seconds(15) {
                let next = try RawConnection(port: port)
                next.send("GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
                served = await next.readUntilClosed(timeout: .seconds(5), orUntil: "\r\n").text.hasPrefix("HTTP/1.1 200")
                if !served { try await Task.sleep(for: .milliseconds(200)) }
            }
            #expect(served, "the connection with an unanswered request still held the only place after 15 s")
            withExtendedLifetime(connection) {}
        }
    }

    /// `HEAD` on a `GET` route (the router generates it): the `GET`'s head, `Content-Length`
    /// included, and not one byte of body, so the next request on the connection is read right.
    @Test func aHeadAnswerSendsNoBodyAndTheConnectionGoesOn() async throws {
        try await withLiveServer(configure: Self.quick) { live in
            let connection = try RawConnection(port: try #require(live.baseURL.port))
            connection.send("HEAD /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            let (first, _) = await connection.readUntilClosed(timeout: .seconds(10), orUntil: "\r\n\r\n")
            connection.send("GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            let (second, _) = await connection.readUntilClosed(timeout: .seconds(10), orUntil: "}")
            // A body after the HEAD's head would come before the GET's answer, in either read.
            let all = first + second
            let parts = all.components(separatedBy: "\r\n\r\n")
            #expect(parts.count == 3, "\(all)")
            #expect(parts[0].hasPrefix("HTTP/1.1 200"), "\(all)")
            #expect(parts.count > 1 && parts[1].hasPrefix("HTTP/1.1 200"), "a body followed the HEAD's head: \(all)")
            #expect(all.hasSuffix("}"), "\(all)")
            let length = { (head: String) in head.split(separator: "\r\n").first { $0.lowercased().hasPrefix("content-length:") } }
            #expect(parts.count > 1 && length(parts[0]) != nil && length(parts[0]) == length(parts[1]), "\(all)")
        }
    }

    /// `HEAD /snapshot` of the JSON snapshot (a handler of its own, not the router's): its
    /// answer ends, so the connection is idle after it, and closed at the idle timeout.
    @Test func aJSONSnapshotHeadEndsItsAnswer() async throws {
        try await withLiveServer(configure: Self.quick) { live in
            let (_, token) = try await live.server.devices.register(name: "head", user: "head", role: "member")
            let connection = try RawConnection(port: try #require(live.baseURL.port))
            connection.send("HEAD /snapshot HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \(token)\r\n\r\n")
            let (head, _) = await connection.readUntilClosed(timeout: .seconds(10), orUntil: "\r\n\r\n")
            #expect(head.hasPrefix("HTTP/1.1 200"), "\(head)")
            #expect(head.lowercased().contains("content-type: application/json"), "\(head)")
            // Idle from here: an answer left open would keep the connection busy, never idle (a
            // next request's answer would end it; a client that sends none holds it for good).
            let (_, closed) = await connection.readUntilClosed(timeout: .seconds(10))
            #expect(closed, "the connection was not closed at its idle timeout")
        }
    }

    @Test func connectionsPastTheCapGetA503() async throws {
        try await withLiveServer(configure: { $0.connections.maxConnections = 2 }) { live in
            let port = try #require(live.baseURL.port)
            // The readiness probe's connection may still be closing: open four and count.
            var open: [RawConnection] = []
            var answers: [String] = []
            for _ in 0..<4 {
                let connection = try RawConnection(port: port)
                connection.send("GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
                let (answer, _) = await connection.readUntilClosed(timeout: .seconds(5), orUntil: "}")
                answers.append(answer)
                open.append(connection)
            }
            let served = answers.filter { $0.hasPrefix("HTTP/1.1 200") }
            let refused = answers.filter { $0.hasPrefix("HTTP/1.1 503") }
            #expect(served.count >= 1 && served.count <= 2)
            #expect(served.count + refused.count == 4)
            #expect(refused.allSatisfy { $0.lowercased().contains("retry-after: 1") && $0.contains(#""error":"unavailable""#) })
            withExtendedLifetime(open) {}
        }
    }
}
