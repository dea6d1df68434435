import Foundation
import RevsyncTestSupport
import Testing
@testable import RevsyncServer

/// `POST /sync` on `RequestWorkers` in a real server: requests run on a worker, and one a
/// client holds there (a slow body) keeps no other request waiting for long.
@Suite(.timeLimit(.minutes(3))) struct RequestWorkersServerTests {
    static let body = #"{"maxRevision":0,"changeSets":[]}"#

    static func head(token: String) -> String {
        "POST /sync HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \(token)\r\nContent-Type: application/json\r\n"
            + "Content-Length: \(body.utf8.count)\r\n\r\n"
    }

    @Test func aWorkerHeldByASlowBodyIsReplacedForTheNextRequest() async throws {
        try await withLiveServer(configure: { $0.requestWorkers = 1 }) { live in
            let workers = try #require(live.server.requestWorkers)
            let port = try #require(live.baseURL.port)
            let (_, slowToken) = try await live.server.devices.register(name: "slow", user: "slow", role: "member")
            let (_, quickToken) = try await live.server.devices.register(name: "quick", user: "quick", role: "member")

            // A sync runs on the worker, which is then kept.
            let first = try RawConnection(port: port)
            first.send(Self.head(token: quickToken) + Self.body)
            let (answered, _) = await first.readUntilClosed(timeout: .seconds(30), orUntil: #""maxRevision""#)
            #expect(answered.hasPrefix("HTTP/1.1 200"))
            try await eventually("the worker waiting again") { workers.counts == (workers: 1, idle: 1) }
            // Counted once its connection's task has the result, which may follow the answer.
            try await eventually("the request counted") {
                live.server.metrics.exposition().contains(#"revsync_sync_request_tasks_total{task="worker"} 1"#)
            }

            // The slow client's request holds the one worker while its body trickles in.
            let slow = try RawConnection(port: port)
            slow.send(Self.head(token: slowToken) + Self.body.prefix(10))
            try await eventually("the slow request on the worker") { workers.counts == (workers: 1, idle: 0) }

            // Another device is answered meanwhile: the held worker is replaced after a second.
            let quick = try RawConnection(port: port)
            quick.send(Self.head(token: quickToken) + Self.body)
            let (text, _) = await quick.readUntilClosed(timeout: .seconds(30), orUntil: #""maxRevision""#)
            #expect(text.hasPrefix("HTTP/1.1 200"), "answered while the worker was held: \(text)")
            // The extra worker ends; the first is still held.
            try await eventually("the extra worker gone") { workers.counts == (workers: 1, idle: 0) }

            // The slow one is answered once its body is complete.
            slow.send(String(Self.body.dropFirst(10)))
            let (late, _) = await slow.readUntilClosed(timeout: .seconds(30), orUntil: #""maxRevision""#)
            #expect(late.hasPrefix("HTTP/1.1 200"))
        }
    }
}
