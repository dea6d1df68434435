import RevsyncTestSupport
import Foundation
import Hummingbird
import HummingbirdTesting
import Logging
import NIOCore
import PostgresNIO
import RevsyncGzip
import RevsyncWire
import Synchronization
import Testing
@testable import RevsyncServer

let adminToken = "test-admin-token"

/// Runs `body` against a server on a fresh database, through Hummingbird's router test client.
func withTestServer<T: Sendable>(
    configure: (inout ServerSettings) -> Void = { _ in },
    applyDelay: ApplyDelay? = nil,
    _ body: @Sendable (TestHarness) async throws -> T
) async throws -> T {
    try await TestDatabase.withNew(migrated: true) { url in
        var settings = ServerSettings.forTests(databaseURL: url)
        settings.adminToken = adminToken
        settings.cacheReconcileInterval = .milliseconds(100)
        configure(&settings)
        var logger = Logger(label: "revsync.tests")
        logger.logLevel = .warning
        logger[metadataKey: "test"] = "\(Test.current?.name ?? "?")"
        let server = try Server(settings: settings, logger: logger, applyDelay: applyDelay)
        return try await server.buildApplication().test(.router) { client in
            try await body(TestHarness(client: client, server: server))
        }
    }
}

/// A registered device: its token and the id the server gave it.
struct TestDevice: Sendable {
    let id: String
    let token: String
}

/// What a test needs from a running server.
struct TestHarness: Sendable {
    let client: any TestClientProtocol
    let server: Server

    func register(_ role: String = "member", name: String = "device") async throws -> TestDevice {
        let body = try JSONEncoder().encode(DeviceRegistration(name: name, user: "user-\(name)", role: role))
        return try await client.execute(
            uri: "/devices", method: .post, headers: [.authorization: "Bearer \(adminToken)"], body: ByteBuffer(bytes: body)
        ) { response in
            guard response.status == .created else {
                throw TestSetupError("registering failed: \(response.status) \(String(buffer: response.body))")
            }
            let registered = try JSONDecoder().decode(RegisteredDevice.self, from: Data(response.body.readableBytesView))
            return TestDevice(id: registered.deviceId, token: registered.token)
        }
    }

    /// POSTs a sync request as a device does (accepting gzip) and decodes a 200 answer; anything else throws with the body.
    func sync(_ device: TestDevice, from maxRevision: Int64, _ changeSets: [ChangeSet] = []) async throws -> SyncResponse {
        let (status, body) = try await post(device, SyncRequest(maxRevision: maxRevision, changeSets: changeSets), gzip: true)
        guard status == .ok else { throw TestSetupError("sync answered \(status): \(String(buffer: body))") }
        return try JSONDecoder().decode(SyncResponse.self, from: Data(body.readableBytesView))
    }

    /// POSTs a sync request; with `gzip`, accepts gzip and returns the inflated body (checked strictly: one whole member).
    func post(_ device: TestDevice, _ request: SyncRequest, gzip: Bool) async throws -> (HTTPResponse.Status, ByteBuffer) {
        let headers: HTTPFields = gzip ? [.authorization: "Bearer \(device.token)", .acceptEncoding: "gzip"] : [.authorization: "Bearer \(device.token)"]
        let (status, body, encoding) = try await client.execute(
            uri: "/sync", method: .post, headers: headers, body: ByteBuffer(bytes: try JSONEncoder().encode(request))
        ) { ($0.status, $0.body, $0.headers[.contentEncoding]) }
        guard encoding == "gzip" else { return (status, body) }
        return (status, try Gzip.inflate(body, maxSize: 1 << 30))
    }

    func post(_ device: TestDevice, _ request: SyncRequest) async throws -> (HTTPResponse.Status, ByteBuffer) {
        try await raw("/sync", token: device.token, body: ByteBuffer(bytes: try JSONEncoder().encode(request)))
    }

    func raw(
        _ uri: String, method: HTTPRequest.Method = .post, token: String?, body: ByteBuffer? = nil, headers extra: HTTPFields = [:]
    ) async throws -> (HTTPResponse.Status, ByteBuffer) {
        var headers = extra
        if let token { headers[.authorization] = "Bearer \(token)" }
        return try await client.execute(uri: uri, method: method, headers: headers, body: body) { ($0.status, $0.body) }
    }

    /// The error body of a non-200 answer.
    func error(_ body: ByteBuffer) throws -> ErrorBody {
        try JSONDecoder().decode(ErrorBody.self, from: Data(body.readableBytesView))
    }

    /// Runs SQL on the test database and returns its rows.
    func rows(_ query: PostgresQuery) async throws -> [PostgresRow] {
        let logger = server.database.logger
        return try await server.postgres.withConnection { try await $0.query(query, logger: logger).collect() }
    }

    /// Opens `count` of the server's pooled connections at once and hands them back idle. A
    /// test with a one-second database timeout calls it first: while the whole suite runs,
    /// PostgreSQL can take longer than that to start a backend, and the request would be
    /// answered 503 for want of a connection instead of for what the test is about.
    ///
    /// Fewer than the pool's size, and at most 20 s: a service may hold a connection for long,
    /// and PostgreSQL may turn new ones away for a while when the suite has them all. It is a
    /// warm-up, not a check: what it could not open, the test opens as it goes.
    ///
    /// `asRequests`: leased the way requests lease them (`Database.withConnection`), which sets
    /// each connection's TCP keep-alive; the lease count then counts them.
    func warmPool(_ count: Int, asRequests: Bool = false) async throws {
        let leased = LeaseCount()
        let server = self.server, deadline = ContinuousClock.now + .seconds(20)
        // Held until every lease is out, so that each is a connection of its own.
        let hold: @Sendable (PostgresConnection) async throws -> Void = { _ in
            leased.value.add(1, ordering: .sequentiallyConsistent)
            while leased.value.load(ordering: .sequentiallyConsistent) < count, ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(5))
            }
        }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<count {
                group.addTask {
                    if asRequests {
                        try? await server.database.withConnection(limits: .unbounded, hold)
                    } else {
                        try? await server.postgres.withConnection(hold)
                    }
                }
            }
            // Ends the group (its error cancels the rest): the leases still waiting for a
            // connection at the deadline are given up.
            group.addTask {
                while leased.value.load(ordering: .sequentiallyConsistent) < count, ContinuousClock.now < deadline {
                    try await Task.sleep(for: .milliseconds(50))
                }
                throw WarmUpOver()
            }
            do { try await group.waitForAll() } catch is WarmUpOver {}
        }
    }

    /// Runs `body` again (up to ten tries) while its request was answered 503 because no
    /// connection became free within the server's database timeout, before it did anything.
    /// With a one-second timeout and every suite on two cores that happens now and then; a
    /// test about timeouts must not take it for the one it checks. `refused` says whether a
    /// result that did not throw was such an answer.
    func againWhileNoConnectionFree<T: Sendable>(
        refused: (T) -> Bool = { _ in false }, _ body: () async throws -> T
    ) async throws -> T {
        let phrase = "no PostgreSQL connection became free"
        for _ in 1..<10 {
            do {
                let result = try await body()
                if !refused(result) { return result }
            } catch where "\(error)".contains(phrase) {}
            try await Task.sleep(for: .milliseconds(200))
        }
        return try await body()
    }

    /// Whether a raw answer is a 503 for want of a free connection (`againWhileNoConnectionFree`).
    static func noConnectionFree(_ answer: (HTTPResponse.Status, ByteBuffer)) -> Bool {
        answer.0 == .serviceUnavailable && String(buffer: answer.1).contains("no PostgreSQL connection became free")
    }

    func head() async throws -> Int64 {
        try await rows("SELECT head FROM revsync_head").first?.decode(Int64.self) ?? -1
    }

    func count(_ entity: String) async throws -> Int {
        try await rows(PostgresQuery(unsafeSQL: "SELECT count(*)::int FROM \"\(entity)\"")).first?.decode(Int.self) ?? -1
    }
}

/// A change set built entity by entity.
func changeSet(seq: Int64?, _ entities: (String, EntityChanges)...) -> ChangeSet {
    var set = ChangeSet(seq: seq)
    for (name, changes) in entities { set[name] = changes }
    return set
}

extension SyncResponse {
    /// The change sets that committed (not corrective).
    var committed: [ChangeSet] { changeSets.filter { $0.conflict == false } }
    var corrective: [ChangeSet] { changeSets.filter { $0.conflict == true } }
}

private struct WarmUpOver: Error {}

/// How many of `warmPool`'s leases are out.
private final class LeaseCount: Sendable {
    let value = Atomic<Int>(0)
}
