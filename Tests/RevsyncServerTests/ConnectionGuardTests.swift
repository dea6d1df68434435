import Foundation
import RevsyncWire
import Testing
@testable import RevsyncServer

/// Slow and idle clients are closed on time, and connections past the cap are refused: on a real socket.
@Suite struct ConnectionGuardTests {
    static func quick(_ settings: inout ServerSettings) {
        settings.connections.idleTimeout = .seconds(1)
        settings.connections.headerTimeout = .seconds(1)
        settings.connections.bodyTimeout = .seconds(1)
    }

    @Test func slowHeadersAreCutAtTheHeaderTimeout() async throws {
        try await withLiveTestServer(configure: Self.quick) { harness in
            let port = try #require(harness.client.port)
            let connection = try RawConnection(port: port)
            let started = ContinuousClock.now
            connection.send("GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            // One more header line after half the timeout does not buy more time.
            try await Task.sleep(for: .milliseconds(500))
            connection.send("X-Slow: 1\r\n")
            let (_, closed) = connection.readUntilClosed(timeout: .seconds(5))
            #expect(closed)
            #expect(ContinuousClock.now - started < .seconds(3))
        }
    }

    @Test func idleConnectionsAreClosed() async throws {
        try await withLiveTestServer(configure: Self.quick) { harness in
            let connection = try RawConnection(port: try #require(harness.client.port))
            let (_, closed) = connection.readUntilClosed(timeout: .seconds(5))
            #expect(closed)
        }
    }

    @Test func slowBodiesAreCutAtTheBodyTimeout() async throws {
        try await withLiveTestServer(configure: Self.quick) { harness in
            let connection = try RawConnection(port: try #require(harness.client.port))
            connection.send("POST /sync HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"maxRev")
            let started = ContinuousClock.now
            let (_, closed) = connection.readUntilClosed(timeout: .seconds(5))
            #expect(closed)
            #expect(ContinuousClock.now - started < .seconds(3))
        }
    }

    @Test func aBodyCutShortIsNotCountedAsAServerError() async throws {
        try await withLiveTestServer(configure: Self.quick) { harness in
            let registered = try await harness.register("member", name: "slow")
            let connection = try RawConnection(port: try #require(harness.client.port))
            connection.send("POST /sync HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \(registered.token)\r\nContent-Length: 1000\r\n\r\n{\"max")
            #expect(connection.readUntilClosed(timeout: .seconds(5)).closed)
            try await Task.sleep(for: .milliseconds(200))
            #expect(!harness.server.metrics.exposition().contains(#"status="500""#))
        }
    }

    @Test func aKeptAliveConnectionServesRequestsWithinTheTimeouts() async throws {
        try await withLiveTestServer(configure: Self.quick) { harness in
            let connection = try RawConnection(port: try #require(harness.client.port))
            for _ in 0..<3 {
                connection.send("GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
                let (text, _) = connection.readUntilClosed(timeout: .seconds(5), orUntil: "}")
                #expect(text.hasPrefix("HTTP/1.1 200"))
            }
        }
    }

    @Test func connectionsPastTheCapGetA503() async throws {
        try await withLiveTestServer(configure: { $0.connections.maxConnections = 2 }) { harness in
            let port = try #require(harness.client.port)
            // The test framework's own client may hold one of the two: open four and count.
            var open: [RawConnection] = []
            var answers: [String] = []
            for _ in 0..<4 {
                let connection = try RawConnection(port: port)
                connection.send("GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
                answers.append(connection.readUntilClosed(timeout: .seconds(5), orUntil: "}").text)
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
