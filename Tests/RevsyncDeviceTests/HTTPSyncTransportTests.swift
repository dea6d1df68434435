import Foundation
import NIOCore
import RevsyncGzip
import RevsyncWire
import Synchronization
import Testing

@testable import RevsyncDevice

@Suite("HTTP transport")
struct HTTPSyncTransportTests {
    func json<Value: Encodable>(_ value: Value) throws -> [UInt8] { Array(try JSONEncoder().encode(value)) }

    @Test func syncSendsGzipWithTheTokenAndInflatesTheAnswer() async throws {
        var changeSet = ChangeSet(seq: 1, conflict: false, revision: 8)
        changeSet.create("teams", 40, [ReservedAttribute.oldId: -1, "revision": 8, "name": "Hawks"])
        let answer = try json(SyncResponse(maxRevision: 8, changeSets: [changeSet]))
        let compressedAnswer = Array(Gzip.deflate(ByteBuffer(bytes: answer)).readableBytesView)
        let server = try MiniHTTPServer { request in
            .init(status: 200, headers: [("Content-Type", "application/json"), ("Content-Encoding", "gzip")], body: compressedAnswer)
        }
        defer { server.stop() }
        var configuration = HTTPSyncTransport.Configuration(baseURL: server.baseURL + "/")
        configuration.compressRequestsFrom = 100
        var pending = ChangeSet(seq: 1)
        pending.create("teams", -1, ["name": .string(String(repeating: "long name ", count: 50))])
        let request = SyncRequest(maxRevision: 7, changeSets: [pending])
        let response = try await withTransport(configuration) { try await $0.sync(request, token: "secret") }

        #expect(response.maxRevision == 8)
        #expect(response.changeSets.first?.entities["teams"]?.attributes[40]?[ReservedAttribute.oldId] == -1)
        let received = try #require(server.requests.first)
        #expect(received.method == "POST")
        #expect(received.path == "/sync")
        #expect(received.headers["authorization"] == "Bearer secret")
        #expect(received.headers["content-type"] == "application/json")
        #expect(received.headers["content-encoding"] == "gzip")
        #expect(received.headers["accept-encoding"] == "gzip")
        let inflated = try Gzip.inflate(ByteBuffer(bytes: received.body), maxSize: 1 << 20)
        #expect(try JSONDecoder().decode(SyncRequest.self, from: Data(inflated.readableBytesView)) == request)
    }

    /// A gzip answer that stops early or goes on after its end is refused, as the server refuses such a request body.
    @Test(arguments: ["truncated", "trailing bytes"])
    func aGzipAnswerThatIsNotOneCompleteMemberIsRefused(_ damage: String) async throws {
        let answer = try json(SyncResponse(maxRevision: 8, changeSets: [ChangeSet(seq: 1, conflict: false, revision: 8)]))
        let whole = Array(Gzip.deflate(ByteBuffer(bytes: answer)).readableBytesView)
        let body = damage == "truncated" ? Array(whole.dropLast(9)) : whole + Array(#"{"maxRevision":9}"#.utf8)
        let server = try MiniHTTPServer { _ in .init(status: 200, headers: [("Content-Encoding", "gzip")], body: body) }
        defer { server.stop() }
        let refusal = try await withTransport(.init(baseURL: server.baseURL)) { transport -> SyncTransportError? in
            do {
                _ = try await transport.sync(SyncRequest(maxRevision: 7), token: "t")
                return nil
            } catch {
                return error as? SyncTransportError
            }
        }
        #expect(refusal == .invalidResponse("POST /sync: the gzip body is not complete, valid gzip"))
    }

    @Test func smallBodiesGoUncompressedAndSnapshotsDecodeInAnyKeyOrder() async throws {
        let snapshot = #"{"changeSets":[{"teams":{"attributes":{"5":{"name":"Owls","revision":3}},"delete":[],"update":[],"create":[5]},"types":["teams"]}],"maxRevision":3}"#
        let server = try MiniHTTPServer { request in
            request.path == "/snapshot" ? .init(status: 200, body: Array(snapshot.utf8)) : .init(status: 200, body: Array(#"{"maxRevision":3,"changeSets":[]}"#.utf8))
        }
        defer { server.stop() }
        let loaded = try await withTransport(.init(baseURL: server.baseURL)) { transport in
            let loaded = try await transport.snapshot(token: "t")
            _ = try await transport.sync(SyncRequest(maxRevision: 3), token: "t")
            return loaded
        }
        #expect(loaded.changeSets.first?.entities["teams"]?.attributes[5]?["name"] == "Owls")
        #expect(server.requests.first?.method == "GET")
        #expect(server.requests.last?.headers["content-encoding"] == nil)
    }

    @Test func errorAnswersBecomeTypedErrors() async throws {
        let server = try MiniHTTPServer { request in
            switch request.headers["authorization"] {
            case "Bearer gap": .init(status: 409, body: Array(#"{"error":"sequence_gap","message":"want 4","expected":4}"#.utf8))
            case "Bearer busy": .init(status: 503, headers: [("Retry-After", "2")], body: Array(#"{"error":"unavailable","message":"db"}"#.utf8))
            case "Bearer old": .init(status: 410, body: Array(#"{"error":"snapshot_required","message":"old"}"#.utf8))
            case "Bearer garbage": .init(status: 200, body: Array("not json".utf8))
            default: .init(status: 401, body: Array(#"{"error":"unauthorized","message":"who"}"#.utf8))
            }
        }
        defer { server.stop() }
        try await withTransport(.init(baseURL: server.baseURL)) { transport in
            func attempt(_ token: String) async -> SyncTransportError? {
                do {
                    _ = try await transport.sync(SyncRequest(maxRevision: 0), token: token)
                    return nil
                } catch {
                    return error as? SyncTransportError
                }
            }
            #expect(await attempt("gap") == .sequenceGap(expected: 4, message: "want 4"))
            #expect(await attempt("busy") == .unavailable(retryAfter: .seconds(2), message: "db"))
            #expect(await attempt("old") == .snapshotRequired(message: "old"))
            #expect(await attempt("nobody") == .unauthorized(message: "who"))
            guard case .invalidResponse? = await attempt("garbage") else {
                Issue.record("a body that is not JSON is an invalid response")
                return
            }
        }
    }

    @Test func devicesMeIsAGetWithTheTokenAndSeqReusedCarriesItsNumbers() async throws {
        let me = DeviceInfo(
            deviceId: "d-1", name: "ipad", user: "ana", role: "member", created: "2024-01-01T00:00:00Z", lastSeen: nil,
            lastSeq: 12, lowestTemporaryId: -30)
        let body = try json(me)
        let server = try MiniHTTPServer { request in
            request.path == "/devices/me"
                ? .init(status: 200, body: body)
                : .init(status: 409, body: Array(#"{"error":"seq_reused","message":"renumber","expected":13,"lowestTemporaryId":-30}"#.utf8))
        }
        defer { server.stop() }
        let (info, refusal) = try await withTransport(.init(baseURL: server.baseURL)) { transport in
            let info = try await transport.device(token: "secret")
            do {
                _ = try await transport.sync(SyncRequest(maxRevision: 0, changeSets: [ChangeSet(seq: 3)]), token: "secret")
                return (info, nil as SyncTransportError?)
            } catch {
                return (info, error as? SyncTransportError)
            }
        }
        #expect(info == me)
        #expect(server.requests.first?.method == "GET")
        #expect(server.requests.first?.headers["authorization"] == "Bearer secret")
        #expect(refusal == .seqReused(expected: 13, lowestTemporaryId: -30, message: "renumber"))
    }

    /// The server sends nothing while it holds a long-poll: the request's deadline is its
    /// wait on top of `requestTimeout`, and the wait stays below `readTimeout`.
    @Test(.timeLimit(.minutes(1)))
    func aLongPollGetsItsWaitOnTopOfTheTimeoutAndStaysBelowTheReadTimeout() async throws {
        let empty = try json(SyncResponse(maxRevision: 3, changeSets: []))
        // Seconds away from each deadline on either side, so that a loaded machine still tells
        // them apart (in the suite's first seconds, 500 ms of slack was not enough): the held
        // request's deadline is 7 s + 2 s, the plain one's 2 s.
        let server = try MiniHTTPServer { _ in
            Thread.sleep(forTimeInterval: 6)
            return .init(status: 200, body: empty)
        }
        defer { server.stop() }
        let exchanges = Mutex<[HTTPExchange]>([])
        var configuration = HTTPSyncTransport.Configuration(baseURL: server.baseURL)
        configuration.requestTimeout = .seconds(2)
        configuration.readTimeout = .seconds(12)
        configuration.observer = { exchange in exchanges.withLock { $0.append(exchange) } }
        let (held, plain) = try await withTransport(configuration) { transport in
            let held = try await transport.sync(SyncRequest(maxRevision: 3, wait: 25), token: "t")
            do {
                _ = try await transport.sync(SyncRequest(maxRevision: 3), token: "t")
                return (held, nil as SyncTransportError?)
            } catch {
                return (held, error as? SyncTransportError)
            }
        }
        #expect(held.maxRevision == 3)
        guard case .connection? = plain else {
            Issue.record("a request without a wait keeps its deadline, got \(String(describing: plain))")
            return
        }
        let sent = try JSONDecoder().decode(SyncRequest.self, from: Data(try #require(server.requests.first).body))
        #expect(sent.wait == 7, "25 s asked, 12 s read timeout less the 5 s margin")
        #expect(exchanges.withLock { $0.map(\.wait) } == [7, nil])
    }

    @Test(.timeLimit(.minutes(1)))
    func cancellingALongPollEndsItsRequestAtOnce() async throws {
        let server = try MiniHTTPServer { _ in
            Thread.sleep(forTimeInterval: 10)
            return .init(status: 200)
        }
        defer { server.stop() }
        try await withTransport(.init(baseURL: server.baseURL)) { transport in
            let call = Task { try await transport.sync(SyncRequest(maxRevision: 0, wait: 30), token: "t") }
            try await Task.sleep(for: .milliseconds(300))
            let cancelled = ContinuousClock.now
            call.cancel()
            _ = try? await call.value
            #expect(ContinuousClock.now - cancelled < .seconds(8), "long before the server's 10 s answer")
        }
    }

    @Test func noServerIsAConnectionError() async throws {
        let server = try MiniHTTPServer { _ in .init(status: 200) }
        let url = server.baseURL
        server.stop()
        var configuration = HTTPSyncTransport.Configuration(baseURL: url)
        configuration.connectTimeout = .milliseconds(500)
        try await withTransport(configuration) { transport in
            do {
                _ = try await transport.schema(token: "t")
                Issue.record("expected a connection error")
            } catch let error as SyncTransportError {
                guard case .connection = error else {
                    Issue.record("expected a connection error, got \(error)")
                    return
                }
                #expect(error.isRetryable)
            }
        }
    }
}

/// Runs `body` with a transport that is shut down however `body` ends: a client
/// dropped without `shutdown()` is a fatal error in AsyncHTTPClient's debug builds,
/// which would take every other test down with it.
func withTransport<T>(
    _ configuration: HTTPSyncTransport.Configuration, _ body: (HTTPSyncTransport) async throws -> T
) async throws -> T {
    let transport = HTTPSyncTransport(configuration: configuration)
    do {
        let result = try await body(transport)
        try await transport.shutdown()
        return result
    } catch {
        try? await transport.shutdown()
        throw error
    }
}
