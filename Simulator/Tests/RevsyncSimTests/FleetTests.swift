import AsyncHTTPClient
import Foundation
import NIOCore
import RevsyncHarness
import RevsyncRedis
import RevsyncTestSupport
import Testing
@testable import RevsyncSim

#if canImport(Glibc)
import Glibc
#endif

@Suite(.serialized) struct FleetTests {
    @Test func aKilledInstanceIsDownUntilRestartedWhileTheOtherServes() async throws {
        try await withFleet(instances: 2) { fleet in
            let scraper = try #require(fleet.metrics)
            // Catch-up traffic on both instances, so both have counts to lose.
            let token = try await registerDevice(on: fleet.baseURL(0))
            for _ in 0..<3 { try await emptySync(on: fleet.baseURL(0), token: token) }
            for _ in 0..<2 { try await emptySync(on: fleet.baseURL(1), token: token) }
            let firstPID = try #require(await fleet.processIdentifier(0))

            try await fleet.kill(0)
            #expect(await fleet.isRunning(0) == false)
            #expect(await fleet.processIdentifier(0) == nil)
            #expect(await ReadinessProbe.isReady(fleet.baseURL(0) + "/ready") == false)
            // Ready, not quick: `isReady` waits one second, which a just-started instance on two
            // cores loaded by the whole suite has taken longer than to answer (a fresh clone's run).
            #expect(await ReadinessProbe.answer(fleet.baseURL(1) + "/ready", timeout: .seconds(30)).status == 200)

            try await fleet.restart(0)
            #expect(await ReadinessProbe.answer(fleet.baseURL(0) + "/ready", timeout: .seconds(30)).status == 200)
            #expect(try #require(await fleet.processIdentifier(0)) != firstPID)
            try await emptySync(on: fleet.baseURL(0), token: token)

            await scraper.scrapeAll()
            // 3 counted by the killed process (scraped before the kill), 1 by its successor, 2 by the other.
            let latency = try #require(await scraper.catchUpLatency())
            #expect(latency.count == 6)
            #expect(latency.p50 > 0 && latency.p50 <= latency.p99 && latency.p99 <= latency.max)
            #expect(await scraper.headRevision() == 0)
            #expect(await scraper.failedScrapes == 0)
        }
    }

    @Test func anInstanceThatCannotStartNamesItsPortAndLog() async throws {
        // Something else already listens on the port the instance is given.
        let listener = try ListeningSocket()
        defer { listener.close() }
        let error = await #expect(throws: FleetError.self) {
            try await withFleet(instances: 1, ports: [listener.port], keepLogsOnFailure: false) { _ in }
        }
        let message = error?.description ?? ""
        #expect(message.contains("instance 0 on port \(listener.port)"))
        #expect(message.contains("server-0.log"))
    }

    @Test func aMissingExecutableIsReportedBeforeAnythingStarts() async throws {
        let configuration = ServerFleetConfiguration(
            executable: "/nonexistent/revsync", ports: [1], databaseURL: "postgres://x@127.0.0.1:1/x", redisURL: nil,
            adminToken: "t", schemaPath: defaultSchemaPath, runDirectory: NSTemporaryDirectory())
        let error = await #expect(throws: FleetError.self) { try await ServerFleet(configuration: configuration).start() }
        #expect(error?.description.contains("/nonexistent/revsync") == true)
    }

    @Test func flushRedisEmptiesTheServer() async throws {
        // A Redis of the test's own: FLUSHALL on the shared one would empty other tests' caches.
        let redis = try await ThrowawayRedisServer.start()
        defer { redis.kill() }
        let url = "redis://127.0.0.1:\(redis.port)"
        try await RedisClient.withClient(configuration: redis.configuration) { client in
            try await client.set("fleet-test-key", ByteBuffer(string: "v"))
            #expect(try await client.get("fleet-test-key") != nil)
            try await StackControl(repositoryRoot: "/nonexistent", redisURL: url, databaseURL: TestDatabase.serverURL).flushRedis()
            #expect(try await client.get("fleet-test-key") == nil)
        }
    }
}

// MARK: - Helpers

/// Runs `body` with a started fleet of the real `revsync` on a fresh database, and stops
/// the fleet and drops the database afterwards, also when `body` throws. The servers'
/// logs are kept after a failure, for the error message that names them.
private func withFleet(
    instances: Int, ports: [Int]? = nil, keepLogsOnFailure: Bool = true, _ body: (ServerFleet) async throws -> Void
) async throws {
    guard let executable = ServerFleetConfiguration.executableNextToThisProgram(named: "revsync") else {
        throw TestSetupError(
            "no `revsync` executable next to the test runner (\(CommandLine.arguments.first ?? "?")); build it with `swift build --build-tests`")
    }
    let runDirectory = FileManager.default.temporaryDirectory.appendingPathComponent("revsync-fleet-\(UUID().uuidString)").path
    let databaseURL = try await TestDatabase.createMigrated()
    let configuration = ServerFleetConfiguration(
        executable: executable, ports: try ports ?? FreePort.loopback(count: instances), databaseURL: databaseURL,
        redisURL: ProcessInfo.processInfo.environment["REVSYNC_TEST_REDIS_URL"] ?? "redis://127.0.0.1:63799",
        adminToken: "fleet-admin", schemaPath: defaultSchemaPath, runDirectory: runDirectory,
        extraEnvironment: ["REVSYNC_DB_CONNECTIONS": "4"], readyTimeout: .seconds(60))
    let fleet = ServerFleet(configuration: configuration, metrics: ServerFleet.scraper(for: configuration))
    do {
        try await fleet.start()
        try await body(fleet)
        await fleet.stopAll()
        await TestDatabase.drop(databaseURL)
        try? FileManager.default.removeItem(atPath: runDirectory)
    } catch {
        await fleet.stopAll()
        await TestDatabase.drop(databaseURL)
        if !keepLogsOnFailure { try? FileManager.default.removeItem(atPath: runDirectory) }
        throw error
    }
}

private func registerDevice(on baseURL: String) async throws -> String {
    var request = HTTPClientRequest(url: baseURL + "/devices")
    request.method = .POST
    request.headers.add(name: "Authorization", value: "Bearer fleet-admin")
    request.headers.add(name: "Content-Type", value: "application/json")
    request.body = .bytes(ByteBuffer(string: #"{"name":"fleet-test","user":"alice","role":"member"}"#))
    let response = try await HTTPClient.shared.execute(request, timeout: .seconds(30))
    let body = try await response.body.collect(upTo: 64 * 1024)
    try #require(response.status == .created, "POST /devices answered \(response.status): \(String(buffer: body))")
    struct Registered: Decodable { var token: String }
    return try JSONDecoder().decode(Registered.self, from: Data(body.readableBytesView)).token
}

private func emptySync(on baseURL: String, token: String) async throws {
    var request = HTTPClientRequest(url: baseURL + "/sync")
    request.method = .POST
    request.headers.add(name: "Authorization", value: "Bearer \(token)")
    request.headers.add(name: "Content-Type", value: "application/json")
    request.body = .bytes(ByteBuffer(string: #"{"maxRevision":0,"changeSets":[]}"#))
    let response = try await HTTPClient.shared.execute(request, timeout: .seconds(30))
    let body = try await response.body.collect(upTo: 1024 * 1024)
    try #require(response.status == .ok, "POST /sync answered \(response.status): \(String(buffer: body))")
}

/// A loopback TCP socket that listens (and never accepts), to occupy a port.
private struct ListeningSocket {
    let descriptor: Int32
    let port: Int

    init() throws {
        let port = try FreePort.loopback(count: 1)[0]
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let listening = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        } && listen(descriptor, 1) == 0
        guard listening else {
            Glibc.close(descriptor)
            throw TestSetupError("cannot listen on 127.0.0.1:\(port): errno \(errno)")
        }
        self.descriptor = descriptor
        self.port = port
    }

    func close() {
        _ = Glibc.close(descriptor)
    }
}
