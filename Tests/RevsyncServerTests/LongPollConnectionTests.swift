import Foundation
import Logging
import NIOCore
import RevsyncTestSupport
import RevsyncWire
import ServiceLifecycle
import Testing
@testable import RevsyncServer

/// Long-poll on a real socket: a waiting request ends when its client leaves and when the
/// server shuts down, and the idle timeout does not cut it.
@Suite(.timeLimit(.minutes(2))) struct LongPollConnectionTests {
    static func request(token: String, wait: Int, close: Bool = false) -> String {
        let body = #"{"maxRevision":0,"changeSets":[],"wait":\#(wait)}"#
        return "POST /sync HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \(token)\r\nContent-Type: application/json\r\n"
            + (close ? "Connection: close\r\n" : "") + "Content-Length: \(body.utf8.count)\r\n\r\n" + body
    }

    /// Commits one note of `writer` through the server's own sync service (its waiters wake as for any request).
    static func commitNote(_ live: LiveServer, _ writer: Device) async throws {
        let request = SyncRequest(maxRevision: 0, changeSets: CacheTests.notes(from: 1, count: 1))
        _ = try await live.server.sync.respond(
            device: writer, body: ByteBuffer(bytes: try JSONEncoder().encode(request)), contentEncoding: nil, acceptEncoding: nil,
            logger: Logger(label: "revsync.tests.writer"))
    }

    /// The connection holds a waiting request, not its task: the request's task ends while it
    /// waits, and the commit's answer is written under that response's head. The request is
    /// counted once answered, not while it waits.
    /// How an answer at `maxRevision` ends: the revision, then the database's history id.
    static func end(_ server: Server, _ maxRevision: Int64) -> String {
        #""maxRevision":\#(maxRevision),"history":"\#(server.history.history.id ?? "")"}"#
    }

    static func end(_ live: LiveServer, _ maxRevision: Int64) -> String { end(live.server, maxRevision) }

    @Test func aCommitAnswersTheRequestItsConnectionHolds() async throws {
        try await withLiveServer { live in
            let (_, token) = try await live.server.devices.register(name: "reader", user: "reader", role: "viewer")
            let (writer, _) = try await live.server.devices.register(name: "writer", user: "writer", role: "member")
            let connection = try RawConnection(port: try #require(live.baseURL.port))
            connection.send(Self.request(token: token, wait: 60))
            try await eventually("the request waiting") { live.server.waiters.count == 1 }
            // Its task ends a moment after the waiter is registered; a request its task held would stay in flight.
            try await eventually("the waiting request's task ended", within: .seconds(10)) { live.server.inFlight.value == 0 }
            #expect(live.server.waiters.count == 1)
            #expect(!live.server.metrics.exposition().contains(#"revsync_http_requests_total{route="/sync""#))
            try await Self.commitNote(live, writer)
            let (text, closed) = await connection.readUntilClosed(timeout: .seconds(20), orUntil: Self.end(live, 1))
            #expect(text.hasPrefix("HTTP/1.1 200"))
            #expect(text.lowercased().contains("content-type: application/json"))
            #expect(text.contains("note 1"))
            #expect(!closed)
            let exposition = live.server.metrics.exposition()
            #expect(exposition.contains(#"revsync_sync_wakeups_total{reason="committed"} 1"#))
            #expect(exposition.contains(#"revsync_http_requests_total{route="/sync",status="200"} 1"#))
        }
    }

    /// One commit answers every request the connections hold, on both event loops, all with
    /// the same bytes; each wake-up is counted once.
    @Test func oneCommitAnswersEveryRequestTheConnectionsHold() async throws {
        try await withLiveServer { live in
            // Enough to spread over both event loops; more only loads the suite's other tests.
            let count = 40
            let (writer, _) = try await live.server.devices.register(name: "writer", user: "writer", role: "member")
            var connections: [RawConnection] = []
            for index in 0..<count {
                let (_, token) = try await live.server.devices.register(name: "reader \(index)", user: "reader", role: "viewer")
                let connection = try RawConnection(port: try #require(live.baseURL.port))
                connection.send(Self.request(token: token, wait: 60))
                connections.append(connection)
            }
            try await eventually("every request waiting", within: .seconds(20)) { live.server.waiters.count == count }
            try await Self.commitNote(live, writer)
            var bodies: Set<String> = []
            for connection in connections {
                let (text, closed) = await connection.readUntilClosed(timeout: .seconds(20), orUntil: Self.end(live, 1))
                #expect(text.hasPrefix("HTTP/1.1 200"))
                #expect(!closed)
                let body = try #require(text.range(of: "\r\n\r\n")).upperBound
                bodies.insert(String(text[body...]))
            }
            #expect(bodies.count == 1)
            #expect(bodies.first?.contains("note 1") == true)
            let exposition = live.server.metrics.exposition()
            #expect(exposition.contains(#"revsync_sync_wakeups_total{reason="committed"} \#(count)"#))
            #expect(exposition.contains("revsync_sync_wake_to_answer_seconds_count \(count)"))
        }
    }

    /// A request pipelined behind a waiting one is answered after it, however soon it is ready.
    @Test func aRequestPipelinedBehindAWaitingOneIsAnsweredAfterIt() async throws {
        try await withLiveServer { live in
            let (_, token) = try await live.server.devices.register(name: "reader", user: "reader", role: "viewer")
            let (writer, _) = try await live.server.devices.register(name: "writer", user: "writer", role: "member")
            let connection = try RawConnection(port: try #require(live.baseURL.port))
            connection.send(Self.request(token: token, wait: 60) + "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            try await eventually("the request waiting") { live.server.waiters.count == 1 }
            let early = await connection.readBytes(timeout: .milliseconds(500)) { !$0.isEmpty }
            #expect(early.isEmpty)
            try await Self.commitNote(live, writer)
            let (text, _) = await connection.readUntilClosed(timeout: .seconds(20), orUntil: #"{"status":"ok"}"#)
            let answer = try #require(text.range(of: Self.end(live, 1)))
            let health = try #require(text.range(of: #"{"status":"ok"}"#))
            #expect(answer.upperBound <= health.lowerBound)
        }
    }

    /// `Connection: close` on a waiting request: its answer is written, then the connection closes.
    @Test func aWaitingRequestThatAsksToCloseIsAnsweredFirst() async throws {
        try await withLiveServer { live in
            let (_, token) = try await live.server.devices.register(name: "closing", user: "closing", role: "viewer")
            let connection = try RawConnection(port: try #require(live.baseURL.port))
            connection.send(Self.request(token: token, wait: 1, close: true))
            let (text, closed) = await connection.readUntilClosed(timeout: .seconds(20))
            #expect(text.hasPrefix("HTTP/1.1 200"))
            #expect(text.hasSuffix(#"{"changeSets":[],"# + Self.end(live, 0)))
            #expect(closed)
        }
    }

    /// A woken request whose catch-up fails for a reason nobody planned for (here the head's table
    /// renamed under the server) is answered `500` from its connection, past the middleware that
    /// logs every other request's failure: it is logged with its cause, and the answer says where.
    @Test func aWokenRequestThatFailsIsLoggedWithItsCause() async throws {
        let log = CapturedLog()
        try await withLiveServer(configure: { $0.redisURL = nil }, logger: log.logger) { live in
            let (phone, token) = try await live.server.devices.register(name: "reader", user: "reader", role: "viewer")
            let connection = try RawConnection(port: try #require(live.baseURL.port))
            connection.send(Self.request(token: token, wait: 60))
            try await eventually("the request waiting") { live.server.waiters.count == 1 }
            let logger = Logger(label: "revsync.tests.rename")
            try await live.server.database.withConnection { try await $0.run("ALTER TABLE revsync_head RENAME TO revsync_head_away", logger) }
            live.server.waiters.advance(to: 1)
            let (text, _) = await connection.readUntilClosed(timeout: .seconds(20), orUntil: "}")
            try await live.server.database.withConnection { try await $0.run("ALTER TABLE revsync_head_away RENAME TO revsync_head", logger) }
            #expect(text.hasPrefix("HTTP/1.1 500"), "\(text.prefix(200))")
            #expect(text.contains(#""error":"internal""#) && text.contains(phone.publicId))
            let logged = log.all.filter { $0.message == "a woken request's catch-up failed" }
            #expect(logged.count == 1)
            #expect(logged.first?.level == .error)
            #expect(logged.first?.metadata["device"] == phone.publicId)
            #expect(logged.first?.metadata["error"]?.contains("revsync_head") == true, "\(logged.first?.metadata ?? [:])")
        }
    }

    /// An error after the wake-up (the device was revoked meanwhile) is the answer, as the contract's error body.
    @Test func aDeviceRevokedWhileItsConnectionHoldsItIsRefused() async throws {
        try await withLiveServer { live in
            let (phone, token) = try await live.server.devices.register(name: "lost phone", user: "lost", role: "viewer")
            let (writer, _) = try await live.server.devices.register(name: "writer", user: "writer", role: "member")
            let connection = try RawConnection(port: try #require(live.baseURL.port))
            connection.send(Self.request(token: token, wait: 60))
            try await eventually("the phone waiting") { live.server.waiters.count == 1 }
            #expect(try await live.server.devices.revoke(publicId: phone.publicId))
            try await Self.commitNote(live, writer)
            let (text, _) = await connection.readUntilClosed(timeout: .seconds(20), orUntil: "}")
            #expect(text.hasPrefix("HTTP/1.1 401"))
            #expect(text.contains(#""error":"#))
            #expect(!text.contains("note 1"))
            // Counted with the status it was answered with, not as the 200 its route returned.
            let exposition = live.server.metrics.exposition()
            #expect(exposition.contains(#"revsync_http_requests_total{route="/sync",status="401"} 1"#))
            #expect(!exposition.contains(#"revsync_http_requests_total{route="/sync",status="200"}"#))
        }
    }

    @Test func aClientThatLeavesEndsItsWait() async throws {
        try await withLiveServer { live in
            let (_, token) = try await live.server.devices.register(name: "leaving", user: "leaving", role: "viewer")
            let connection = try RawConnection(port: try #require(live.baseURL.port))
            connection.send(Self.request(token: token, wait: 60))
            try await eventually("the request waiting") { live.server.waiters.count == 1 }
            connection.stopSending()
            try await eventually("the waiter gone") { live.server.waiters.count == 0 }
            // Counted by the request's task as it resumes, a moment after the waiter is gone.
            try await eventually("the release counted") {
                live.server.metrics.exposition().contains(#"revsync_sync_wakeups_total{reason="released"} 1"#)
            }
            // Nothing was answered: counted as a request its client closed, as proxies log it.
            try await eventually("the request counted") {
                live.server.metrics.exposition().contains(#"revsync_http_requests_total{route="/sync",status="499"} 1"#)
            }
            #expect(!live.server.metrics.exposition().contains(#"revsync_http_requests_total{route="/sync",status="200"}"#))
        }
    }

    @Test func theIdleTimeoutDoesNotCutAWait() async throws {
        try await withLiveServer(configure: { $0.connections.idleTimeout = .seconds(1) }) { live in
            let (_, token) = try await live.server.devices.register(name: "patient", user: "patient", role: "viewer")
            let connection = try RawConnection(port: try #require(live.baseURL.port))
            connection.send(Self.request(token: token, wait: 3))
            let (text, closed) = await connection.readUntilClosed(timeout: .seconds(20), orUntil: Self.end(live, 0))
            #expect(text.hasPrefix("HTTP/1.1 200"))
            #expect(!closed)
            #expect(live.server.metrics.exposition().contains(#"revsync_sync_wakeups_total{reason="timed_out"} 1"#))
        }
    }

    @Test func shutdownAnswersEveryWaiterAtOnce() async throws {
        try await TestDatabase.withNew(migrated: true) { url in
            var settings = ServerSettings.forTests(databaseURL: url)
            settings.port = 0
            settings.databaseConnections = 4
            var logger = Logger(label: "revsync.tests.shutdown")
            logger.logLevel = .warning
            let server = try Server(settings: settings, logger: logger)
            let listening = ListeningPort()
            let group = ServiceGroup(services: [server.buildApplication(onListening: { listening.set($0) })], logger: logger)
            try await withThrowingTaskGroup(of: Void.self) { tasks in
                tasks.addTask { try await group.run() }
                let port = try await listening.wait()
                let (_, token) = try await server.devices.register(name: "waiting", user: "waiting", role: "viewer")
                let connections = try (0..<3).map { _ in try RawConnection(port: port) }
                for connection in connections { connection.send(Self.request(token: token, wait: 60)) }
                try await eventually("every request waiting") { server.waiters.count == connections.count }
                let stopping = ContinuousClock.now
                await group.triggerGracefulShutdown()
                for connection in connections {
                    let end = Self.end(server, 0)
                    let (text, _) = await connection.readUntilClosed(timeout: .seconds(20), orUntil: end)
                    #expect(text.hasPrefix("HTTP/1.1 200"))
                    #expect(text.contains(#"{"changeSets":[],"# + end))
                }
                // Well inside the 60 s wait: nobody waited it out.
                #expect(ContinuousClock.now - stopping < .seconds(20))
                // The rest of the stop is the other services'. Under the whole suite's load the
                // PostgreSQL client alone can take `BoundedStop`'s 5 s, so it is bounded apart, still
                // short of the wait.
                try await tasks.waitForAll()
                #expect(ContinuousClock.now - stopping < .seconds(45))
            }
        }
    }
}
