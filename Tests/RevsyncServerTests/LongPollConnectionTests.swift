import Foundation
import Logging
import RevsyncHarness
import RevsyncTestSupport
import RevsyncWire
import ServiceLifecycle
import Testing
@testable import RevsyncServer

/// Long-poll on a real socket: a waiting request ends when its client leaves and when the
/// server shuts down, and the idle timeout does not cut it.
@Suite(.timeLimit(.minutes(2))) struct LongPollConnectionTests {
    static func request(token: String, wait: Int) -> String {
        let body = #"{"maxRevision":0,"changeSets":[],"wait":\#(wait)}"#
        return "POST /sync HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \(token)\r\nContent-Type: application/json\r\n"
            + "Content-Length: \(body.utf8.count)\r\n\r\n" + body
    }

    @Test func aClientThatLeavesEndsItsWait() async throws {
        try await withLiveServer { live in
            let (_, token) = try await live.server.devices.register(name: "leaving", user: "leaving", role: "viewer")
            let connection = try RawConnection(port: try #require(live.baseURL.port))
            connection.send(Self.request(token: token, wait: 60))
            try await LongPollTests.eventually("the request waiting") { live.server.waiters.count == 1 }
            connection.stopSending()
            try await LongPollTests.eventually("the waiter gone") { live.server.waiters.count == 0 }
            // Counted by the request's task as it resumes, a moment after the waiter is gone.
            try await LongPollTests.eventually("the release counted") {
                live.server.metrics.exposition().contains(#"revsync_sync_wakeups_total{reason="released"} 1"#)
            }
        }
    }

    @Test func theIdleTimeoutDoesNotCutAWait() async throws {
        try await withLiveServer(configure: { $0.connections.idleTimeout = .seconds(1) }) { live in
            let (_, token) = try await live.server.devices.register(name: "patient", user: "patient", role: "viewer")
            let connection = try RawConnection(port: try #require(live.baseURL.port))
            connection.send(Self.request(token: token, wait: 3))
            let (text, closed) = await connection.readUntilClosed(timeout: .seconds(20), orUntil: #""maxRevision":0}"#)
            #expect(text.hasPrefix("HTTP/1.1 200"))
            #expect(!closed)
            #expect(live.server.metrics.exposition().contains(#"revsync_sync_wakeups_total{reason="timed_out"} 1"#))
        }
    }

    @Test func shutdownAnswersEveryWaiterAtOnce() async throws {
        let url = try await TestDatabase.create()
        defer { Task { await TestDatabase.drop(url) } }
        let port = try FreePort.kernelChosenPort()
        var settings = ServerSettings()
        settings.databaseURL = url
        settings.schemaPath = defaultSchemaPath
        settings.port = port
        settings.databaseConnections = 4
        settings.databaseTimeout = .seconds(30)
        settings.redisURL = ProcessInfo.processInfo.environment["REVSYNC_TEST_REDIS_URL"] ?? "redis://127.0.0.1:63799"
        var logger = Logger(label: "revsync.tests.shutdown")
        logger.logLevel = .warning
        let server = try Server(settings: settings, logger: logger)
        let group = ServiceGroup(services: [server.buildApplication()], logger: logger)
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask { try await group.run() }
            try await LongPollTests.eventually("the server listening") { (try? RawConnection(port: port)) != nil }
            let (_, token) = try await server.devices.register(name: "waiting", user: "waiting", role: "viewer")
            let connections = try (0..<3).map { _ in try RawConnection(port: port) }
            for connection in connections { connection.send(Self.request(token: token, wait: 60)) }
            try await LongPollTests.eventually("every request waiting") { server.waiters.count == connections.count }
            let stopping = ContinuousClock.now
            await group.triggerGracefulShutdown()
            for connection in connections {
                let (text, _) = await connection.readUntilClosed(timeout: .seconds(20), orUntil: #""maxRevision":0}"#)
                #expect(text.hasPrefix("HTTP/1.1 200"))
                #expect(text.contains(#"{"changeSets":[],"maxRevision":0}"#))
            }
            try await tasks.waitForAll()
            // Well inside the 60 s wait: nobody waited it out.
            #expect(ContinuousClock.now - stopping < .seconds(20))
        }
    }
}
