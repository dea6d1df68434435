import CompressNIO
import Foundation
import Hummingbird
import Logging
import NIOCore
import RevsyncTestSupport
import RevsyncWire
import Testing
@testable import RevsyncServer

/// The OpenAPI document (`Sources/RevsyncServer/Resources/openapi.json`) says what the server
/// really answers: every operation and the main errors are exercised, and each real answer's
/// status, content type, headers and body are checked against the document.
@Suite struct OpenAPIConformanceTests {
    /// Checks answers and remembers which operation gave which status.
    struct Checker {
        let contract: OpenAPIContract
        var seen: Set<String> = []

        @discardableResult
        mutating func expect(_ exchange: OpenAPIExchange, _ status: Int, sourceLocation: SourceLocation = #_sourceLocation) -> OpenAPIExchange {
            #expect(exchange.status == status, "\(exchange.method) \(exchange.path): \(exchange.text.prefix(300))", sourceLocation: sourceLocation)
            let problems = contract.problems(for: exchange)
            #expect(problems.isEmpty, "\(problems.joined(separator: "\n"))", sourceLocation: sourceLocation)
            if let template = contract.template(for: exchange.path, method: exchange.method) {
                seen.insert("\(exchange.method) \(template) \(exchange.status)")
            }
            return exchange
        }

        /// Operations never answered with a 2xx so far.
        var operationsWithoutSuccess: [String] {
            contract.operations.filter { operation in !(200..<300).contains { seen.contains("\(operation) \($0)") } }
        }
    }

    static func json<T: Encodable>(_ value: T) throws -> ByteBuffer {
        ByteBuffer(bytes: try JSONEncoder().encode(value))
    }

    static func sync(_ maxRevision: Int64, _ changeSets: ChangeSet...) throws -> ByteBuffer {
        try json(SyncRequest(maxRevision: maxRevision, changeSets: changeSets))
    }

    static func note(seq: Int64?, _ temporary: Int64, _ body: String = "note") -> ChangeSet {
        changeSet(seq: seq, ("notes", EntityChanges(create: [temporary], attributes: [temporary: ["body": .string(body), "pinned": false]])))
    }

    static func decode<T: Decodable>(_ type: T.Type, _ exchange: OpenAPIExchange) throws -> T {
        try JSONDecoder().decode(type, from: Data(exchange.text.utf8))
    }

    static func gzip(_ buffer: ByteBuffer) throws -> ByteBuffer {
        var buffer = buffer
        return try buffer.compress(with: .gzip)
    }

    // MARK: - The server's answers

    @Test func everyOperationAnswersAsTheDocumentSays() async throws {
        let contract = try OpenAPIContract.load()
        try await withTestServer(configure: { $0.limits.catchUpMaxChangeSets = 3 }) { h in
            var c = Checker(contract: contract)
            let gzipAccepted: HTTPFields = [.acceptEncoding: "gzip"]

            // Operations endpoints, and the document itself: the bundled copy is the source file.
            let served = c.expect(try await h.exchange(.get, "/openapi.json"), 200)
            #expect(try OpenAPIJSON.parse(Data(served.text.utf8)).sameValue(as: contract.document), "GET /openapi.json is not Sources/RevsyncServer/Resources/openapi.json")
            c.expect(try await h.exchange(.get, "/openapi.json", headers: gzipAccepted), 200)
            c.expect(try await h.exchange(.get, "/health"), 200)
            c.expect(try await h.exchange(.get, "/health", headers: gzipAccepted), 200)
            c.expect(try await h.exchange(.get, "/ready"), 200)
            c.expect(try await h.exchange(.get, "/metrics"), 200)

            // Registration.
            let admin = try await h.register("admin", name: "admin-tablet")
            let registered = c.expect(
                try await h.exchange(.post, "/devices", token: adminToken, body: Self.json(DeviceRegistration(name: "phone", user: "alice", role: "member"))), 201)
            let created = try Self.decode(RegisteredDevice.self, registered)
            let phone = TestDevice(id: created.deviceId, token: created.token)
            for body in [#"{"name":"","user":"u","role":"member"}"#, #"{"name":"a","user":"u","role":"emperor"}"#, #"{"name":"a"}"#, "not json", "[]"] {
                c.expect(try await h.exchange(.post, "/devices", token: adminToken, body: ByteBuffer(string: body)), 400)
            }
            c.expect(try await h.exchange(.post, "/devices", body: Self.json(DeviceRegistration(name: "x", user: "y", role: "member"))), 401)
            c.expect(try await h.exchange(.post, "/devices", token: phone.token, body: Self.json(DeviceRegistration(name: "x", user: "y", role: "member"))), 401)
            c.expect(try await h.exchange(.get, "/devices", token: adminToken), 200)
            c.expect(try await h.exchange(.get, "/devices", token: phone.token), 401)
            c.expect(try await h.exchange(.get, "/devices"), 401)

            // Sync: commits, acknowledgements in author form, catch-up cut by `more`, corrective sets.
            let basics = try await h.seedBasics(admin)
            c.expect(try await h.exchange(.post, "/sync", token: phone.token, body: Self.sync(0)), 200)
            let first = c.expect(try await h.exchange(.post, "/sync", token: phone.token, body: Self.sync(basics.revision, Self.note(seq: 1, -1))), 200)
            let noteId = try #require(try Self.decode(SyncResponse.self, first).committed.last?.permanentId(of: -1, in: "notes"))
            c.expect(try await h.exchange(.post, "/sync", token: phone.token, body: Self.sync(0, Self.note(seq: 2, -2), Self.note(seq: 3, -3))), 200)
            let page = c.expect(try await h.exchange(.post, "/sync", token: phone.token, body: Self.sync(0)), 200)
            #expect(try Self.decode(SyncResponse.self, page).more == true)
            c.expect(try await h.exchange(.post, "/sync", token: admin.token, body: Self.sync(0)), 200)
            let edit = changeSet(seq: 2, ("notes", EntityChanges(update: [noteId], attributes: [noteId: ["revision": 2, "body": "edited"]])))
            let edited = c.expect(try await h.exchange(.post, "/sync", token: admin.token, body: Self.sync(0, edit)), 200)
            let editRevision = try #require(try Self.decode(SyncResponse.self, edited).committed.last?.revision)
            let stale = changeSet(seq: 4, ("notes", EntityChanges(update: [noteId], attributes: [noteId: ["revision": 2, "body": "mine"]])))
            let forbidden = changeSet(seq: 5, ("leagues", EntityChanges(delete: [basics.league], attributes: [basics.league: ["revision": .integer(basics.revision)]])))
            let unknownEntity = changeSet(seq: nil, ("Zz", EntityChanges(create: [-50])))
            let positiveCreate = changeSet(seq: 6, ("notes", EntityChanges(create: [77], attributes: [77: ["body": "b", "pinned": false]])))
            let reusedTemporary = Self.note(seq: 7, -1, "again")
            let rejected = c.expect(
                try await h.exchange(.post, "/sync", token: phone.token, body: Self.sync(4, stale, forbidden, positiveCreate, reusedTemporary, unknownEntity)), 200)
            #expect(try Self.decode(SyncResponse.self, rejected).corrective.count == 5)
            let gzipped = try Self.gzip(Self.sync(0, Self.note(seq: 8, -8)))
            c.expect(try await h.exchange(.post, "/sync", token: phone.token, body: gzipped, headers: [.contentEncoding: "gzip", .acceptEncoding: "gzip"]), 200)
            let remove = changeSet(seq: 3, ("notes", EntityChanges(delete: [noteId], attributes: [noteId: ["revision": .integer(editRevision)]])))
            c.expect(try await h.exchange(.post, "/sync", token: admin.token, body: Self.sync(0, remove)), 200)

            // Sync envelope errors.
            c.expect(try await h.exchange(.post, "/sync", token: phone.token, body: ByteBuffer(string: "{\"maxRevision\": 0,")), 400)
            c.expect(try await h.exchange(.post, "/sync", token: phone.token, body: ByteBuffer(string: "[1, 2]")), 400)
            c.expect(try await h.exchange(.post, "/sync", token: phone.token, body: ByteBuffer(string: #"{"maxRevision":-1,"changeSets":[]}"#)), 400)
            c.expect(try await h.exchange(.post, "/sync", body: Self.sync(0)), 401)
            c.expect(try await h.exchange(.post, "/sync", token: "rsd_unknown", body: Self.sync(0)), 401)
            let gap = c.expect(try await h.exchange(.post, "/sync", token: phone.token, body: Self.sync(0, Self.note(seq: 40, -40))), 409)
            #expect(try Self.decode(ErrorBody.self, gap).error == "sequence_gap")
            let reused = c.expect(try await h.exchange(.post, "/sync", token: phone.token, body: Self.sync(0, Self.note(seq: 1, -41, "other"))), 409)
            #expect(try Self.decode(ErrorBody.self, reused).error == "seq_reused")
            c.expect(try await h.exchange(.post, "/sync", token: phone.token, body: Self.sync(999)), 409)
            let many = "{\"maxRevision\":0,\"changeSets\":[" + Array(repeating: #"{"types":[]}"#, count: 1001).joined(separator: ",") + "]}"
            c.expect(try await h.exchange(.post, "/sync", token: phone.token, body: ByteBuffer(string: many)), 413)
            c.expect(try await h.exchange(.post, "/sync", token: phone.token, body: Self.sync(0), headers: [.contentEncoding: "br"]), 415)
            c.expect(try await h.exchange(.post, "/sync", token: phone.token, body: Self.sync(0), headers: [.contentEncoding: "gzip"]), 415)

            // What a new device reads first.
            c.expect(try await h.exchange(.get, "/snapshot", token: phone.token), 200)
            c.expect(try await h.exchange(.get, "/snapshot", token: phone.token, headers: gzipAccepted), 200)
            // The SQLite file: whole, gzip, resumed, and a range past its end.
            let sqlite: HTTPFields = [.accept: "application/vnd.sqlite3"]
            let file = c.expect(try await h.exchange(.get, "/snapshot", token: phone.token, headers: sqlite), 200)
            c.expect(try await h.exchange(.get, "/snapshot", token: phone.token, headers: [.accept: "application/vnd.sqlite3", .acceptEncoding: "gzip"]), 200)
            let tag = try #require(file.headers["etag"])
            c.expect(
                try await h.exchange(.get, "/snapshot", token: phone.token, headers: [.accept: "application/vnd.sqlite3", .range: "bytes=10-", .ifRange: tag]), 206)
            c.expect(
                try await h.exchange(.get, "/snapshot", token: phone.token, headers: [.accept: "application/vnd.sqlite3", .range: "bytes=\(file.body.readableBytes)-"]),
                416)
            c.expect(try await h.exchange(.get, "/snapshot"), 401)
            c.expect(try await h.exchange(.get, "/schema", token: phone.token), 200)
            c.expect(try await h.exchange(.get, "/schema", token: admin.token, headers: gzipAccepted), 200)
            c.expect(try await h.exchange(.get, "/schema", token: adminToken), 401)
            try await h.server.devices.flushSeen()  // so that lastSeen is set (normally written every 30 s)
            let me = c.expect(try await h.exchange(.get, "/devices/me", token: phone.token), 200)
            #expect(try Self.decode(DeviceInfo.self, me).lastSeen != nil)
            #expect(try Self.decode(DeviceInfo.self, me).lastSeq == 8)
            c.expect(try await h.exchange(.get, "/devices/me"), 401)

            // The device lifecycle.
            let unknown = "/devices/\(UUID().uuidString.lowercased())"
            c.expect(try await h.exchange(.patch, "/devices/\(phone.id)", token: adminToken, body: ByteBuffer(string: #"{"role":"viewer"}"#)), 200)
            c.expect(try await h.exchange(.patch, "/devices/\(phone.id)", token: adminToken, body: ByteBuffer(string: #"{"role":"emperor"}"#)), 400)
            c.expect(try await h.exchange(.patch, "/devices/\(phone.id)", token: adminToken, body: ByteBuffer(string: "{")), 400)
            c.expect(try await h.exchange(.patch, unknown, token: adminToken, body: ByteBuffer(string: #"{"role":"viewer"}"#)), 404)
            c.expect(try await h.exchange(.patch, "/devices/\(phone.id)", token: phone.token, body: ByteBuffer(string: #"{"role":"admin"}"#)), 401)
            let rotated = try Self.decode(RegisteredDevice.self, c.expect(try await h.exchange(.post, "/devices/\(phone.id)/token", token: adminToken), 200))
            c.expect(try await h.exchange(.post, "\(unknown)/token", token: adminToken), 404)
            c.expect(try await h.exchange(.post, "/devices/\(phone.id)/token"), 401)
            c.expect(try await h.exchange(.get, "/devices/me", token: phone.token), 401)
            c.expect(try await h.exchange(.get, "/devices/me", token: rotated.token), 200)
            c.expect(try await h.exchange(.delete, "/devices/\(phone.id)", token: phone.token), 401)
            c.expect(try await h.exchange(.delete, "/devices/\(phone.id)", token: adminToken), 204)
            c.expect(try await h.exchange(.delete, unknown, token: adminToken), 404)
            c.expect(try await h.exchange(.delete, "/devices/not-a-uuid", token: adminToken), 404)
            c.expect(try await h.exchange(.post, "/sync", token: rotated.token, body: Self.sync(0)), 401)
            c.expect(try await h.exchange(.patch, "/devices/\(phone.id)", token: adminToken, body: ByteBuffer(string: #"{"role":"member"}"#)), 404)
            c.expect(try await h.exchange(.post, "/devices/\(phone.id)/token", token: adminToken), 404)
            let listed = c.expect(try await h.exchange(.get, "/devices", token: adminToken), 200)
            #expect(try Self.decode(DeviceList.self, listed).devices.contains { $0.deviceId == phone.id && $0.revoked != nil })

            #expect(c.operationsWithoutSuccess.isEmpty, "never answered with a 2xx: \(c.operationsWithoutSuccess)")
        }
    }

    @Test func snapshotRequiredIsDocumented() async throws {
        let contract = try OpenAPIContract.load()
        try await withTestServer(configure: { $0.logRetention = 2 }) { h in
            var c = Checker(contract: contract)
            let device = try await h.register()
            let notes = (1...5).map { Self.note(seq: Int64($0), -Int64($0)) }
            c.expect(try await h.exchange(.post, "/sync", token: device.token, body: Self.json(SyncRequest(maxRevision: 0, changeSets: notes))), 200)
            _ = try await h.server.pruner.pruneOnce()
            c.expect(try await h.exchange(.post, "/sync", token: device.token, body: Self.sync(1)), 410)
        }
    }

    @Test func disabledDeviceManagementIsDocumented() async throws {
        let contract = try OpenAPIContract.load()
        try await withTestServer(configure: { $0.adminToken = nil }) { h in
            var c = Checker(contract: contract)
            let id = UUID().uuidString.lowercased()
            c.expect(try await h.exchange(.post, "/devices", token: adminToken, body: Self.json(DeviceRegistration(name: "a", user: "b", role: "member"))), 403)
            c.expect(try await h.exchange(.get, "/devices", token: adminToken), 403)
            c.expect(try await h.exchange(.delete, "/devices/\(id)", token: adminToken), 403)
            c.expect(try await h.exchange(.patch, "/devices/\(id)", token: adminToken, body: ByteBuffer(string: #"{"role":"viewer"}"#)), 403)
            c.expect(try await h.exchange(.post, "/devices/\(id)/token", token: adminToken), 403)
        }
    }

    @Test func bodiesOverTheLimitAreDocumented() async throws {
        let contract = try OpenAPIContract.load()
        try await withTestServer(configure: { $0.limits.maxBodyBytes = 64 }) { h in
            var c = Checker(contract: contract)
            let device = try await h.register()
            let big = ByteBuffer(string: "{\"maxRevision\":0,\"changeSets\":[],\"padding\":\"" + String(repeating: "x", count: 200) + "\"}")
            c.expect(try await h.exchange(.post, "/sync", token: device.token, body: big), 413)
            let registration = ByteBuffer(string: #"{"role":"member","user":"u","name":""# + String(repeating: "n", count: 100) + "\"}")
            c.expect(try await h.exchange(.post, "/devices", token: adminToken, body: registration), 413)
            let role = ByteBuffer(string: #"{"role":""# + String(repeating: "r", count: 100) + "\"}")
            c.expect(try await h.exchange(.patch, "/devices/\(device.id)", token: adminToken, body: role), 413)
        }
    }

    @Test func requestsOverTheInFlightCapAreDocumented() async throws {
        let contract = try OpenAPIContract.load()
        // One request at a time, and a change set that holds its slot for a second.
        try await withTestServer(configure: { $0.maxRequestsInFlight = 1 }, applyDelay: { try? await Task.sleep(for: .seconds(1)) }) { h in
            var c = Checker(contract: contract)
            let device = try await h.register()
            async let slow = h.exchange(.post, "/sync", token: device.token, body: Self.sync(0, Self.note(seq: 1, -1)))
            try await Task.sleep(for: .milliseconds(300))
            let refused = c.expect(try await h.exchange(.get, "/health"), 503)
            #expect(refused.headers["retry-after"] != nil)
            c.expect(try await h.exchange(.get, "/openapi.json"), 503)
            c.expect(try await slow, 200)
        }
    }

    @Test func unreachableDatabaseIsDocumented() async throws {
        let contract = try OpenAPIContract.load()
        var settings = ServerSettings()
        settings.databaseURL = "postgres://revsync@127.0.0.1:1/none"
        settings.schemaPath = defaultSchemaPath
        settings.adminToken = adminToken
        settings.redisURL = nil
        settings.databaseTimeout = .seconds(2)
        var quiet = Logger(label: "revsync.tests.openapi.unreachable")
        quiet.logLevel = .critical
        let server = try Server(settings: settings, logger: quiet)
        try await server.buildApplication(migrate: false).test(.router) { client in
            let h = TestHarness(client: client, server: server)
            var c = Checker(contract: contract)
            let answer = c.expect(try await h.exchange(.post, "/sync", token: "rsd_x", body: Self.sync(0)), 503)
            #expect(answer.headers["retry-after"] != nil)
            c.expect(try await h.exchange(.get, "/devices/me", token: "rsd_x"), 503)
            c.expect(try await h.exchange(.get, "/devices", token: adminToken), 503)
            c.expect(try await h.exchange(.get, "/ready"), 503)
            c.expect(try await h.exchange(.get, "/health"), 200)
            c.expect(try await h.exchange(.get, "/openapi.json"), 200)
        }
    }

    // MARK: - The document

    @Test func documentUsesOnlyWhatTheValidatorChecks() throws {
        let contract = try OpenAPIContract.load()
        #expect(contract.document["openapi"]?.stringValue?.hasPrefix("3.1.") == true)
        var unsupported: [String] = []
        for (name, schema) in contract.document["components"]?["schemas"]?.objectValue ?? [:] {
            unsupported += OpenAPISchemaValidator.unsupportedKeywords(in: schema, at: "#/components/schemas/\(name)")
        }
        #expect(unsupported.isEmpty, "\(unsupported)")
        // Every $ref resolves.
        func references(_ node: OpenAPIJSON) -> [String] {
            switch node {
            case .object(let members): return (members["$ref"]?.stringValue.map { [$0] } ?? []) + members.values.flatMap(references)
            case .array(let items): return items.flatMap(references)
            default: return []
            }
        }
        let dangling = references(contract.document).filter { contract.validator.resolve($0) == nil }
        #expect(dangling.isEmpty, "\(dangling)")
    }

    @Test func everyOperationDocumentsItsErrors() throws {
        let contract = try OpenAPIContract.load()
        #expect(contract.operations.count == 13, "\(contract.operations)")
        for (template, item) in contract.document["paths"]?.objectValue ?? [:] {
            for method in OpenAPIContract.methods {
                guard let operation = item[method] else { continue }
                let responses = operation["responses"]?.objectValue ?? [:]
                let name = "\(method.uppercased()) \(template)"
                #expect(responses["500"] != nil && responses["503"] != nil, "\(name) must list 500 and 503")
                let unavailable = contract.dereference(responses["503"])
                #expect(contract.dereference(unavailable?["headers"]?["Retry-After"])?["required"]?.boolValue == true, "\(name): 503 needs Retry-After")
                let secured = !(operation["security"]?.arrayValue ?? []).isEmpty
                #expect(secured == (responses["401"] != nil), "\(name): 401 is listed exactly when the operation needs a token")
                #expect(operation["operationId"]?.stringValue != nil, "\(name) has no operationId")
            }
        }
    }

    @Test func errorCodesAndReasonsAreTheWireTypes() throws {
        let contract = try OpenAPIContract.load()
        let codes = contract.document["components"]?["schemas"]?["ErrorCode"]?["enum"]?.arrayValue?.compactMap(\.stringValue) ?? []
        #expect(Set(codes) == Set(ErrorCode.allCases.map(\.rawValue)))
        let reasons = contract.document["components"]?["schemas"]?["ConflictReason"]?["properties"]?["code"]?["enum"]?.arrayValue?.compactMap(\.stringValue) ?? []
        #expect(Set(reasons) == Set(ConflictReason.Code.allCases.map(\.rawValue)))
        // Each code is accepted under its own status (in the shape the server sends), and only there.
        let statuses = ["400": "BadRequest", "401": "Unauthorized", "403": "Forbidden", "404": "NotFound", "405": "MethodNotAllowed", "409": "Conflict", "410": "Gone",
                        "413": "TooLarge", "415": "UnsupportedEncoding", "500": "Internal", "503": "Unavailable"]
        for code in ErrorCode.allCases {
            let body = try OpenAPIJSON.parse(JSONEncoder().encode(
                SyncError(code, "m", expected: 3, lowestTemporaryId: -2).errorBody(seq: 1)))
            for (status, name) in statuses {
                let schema = try #require(contract.dereference(contract.document["components"]?["responses"]?[name])?["content"]?["application/json"]?["schema"])
                let problems = contract.validator.problems(body, against: schema)
                #expect(problems.isEmpty == (String(code.status) == status), "\(code.rawValue) under \(status): \(problems)")
            }
        }
    }

    // MARK: - The checks themselves

    @Test func validatorRejectsBodiesTheDocumentDoesNotAllow() throws {
        let contract = try OpenAPIContract.load()
        func problems(_ json: String, _ schema: String) throws -> [String] {
            try contract.validator.problems(OpenAPIJSON.parse(Data(json.utf8)), against: .object(["$ref": .string("#/components/schemas/\(schema)")]))
        }
        // Conforming bodies pass, so the rejections below are about what they change.
        #expect(try problems(#"{"error":"not_found","message":"no such device"}"#, "Error").isEmpty)
        #expect(try problems(#"{"error":"seq_reused","message":"m","seq":1,"expected":3,"lowestTemporaryId":-1}"#, "ConflictError").isEmpty)
        let committed = #"{"conflict":false,"revision":2,"seq":1,"types":["notes"],"notes":{"create":[1],"update":[],"delete":[],"attributes":{"1":{"__oldId__":-1,"revision":2,"body":"x","pinned":false,"author_id":null}}}}"#
        #expect(try problems(#"{"changeSets":[\#(committed)],"maxRevision":2}"#, "SyncResponse").isEmpty)

        #expect(try !problems(#"{"error":"teapot","message":"m"}"#, "Error").isEmpty, "an unknown error code")
        #expect(try !problems(#"{"error":"not_found"}"#, "Error").isEmpty, "no message")
        #expect(try !problems(#"{"error":"not_found","message":"m","detail":"x"}"#, "Error").isEmpty, "a property the contract does not have")
        #expect(try !problems(#"{"error":"not_found","message":"m","expected":"3"}"#, "Error").isEmpty, "expected as a string")
        #expect(try !problems(#"{"error":"seq_reused","message":"m","expected":3}"#, "ConflictError").isEmpty, "seq_reused without seq and lowestTemporaryId")
        #expect(try !problems(#"{"error":"invalid_json","message":"m"}"#, "ConflictError").isEmpty, "a 400 code under 409")
        #expect(try !problems(#"{"changeSets":[],"maxRevision":-1}"#, "SyncResponse").isEmpty, "a negative revision")
        #expect(try !problems(#"{"changeSets":[{"conflict":"no","revision":1,"types":[]}],"maxRevision":1}"#, "SyncResponse").isEmpty, "conflict as a string")
        #expect(try !problems(#"{"changeSets":[{"conflict":true,"types":[]}],"maxRevision":1}"#, "SyncResponse").isEmpty, "a corrective set without reason")
        #expect(try !problems(committed.replacingOccurrences(of: #""pinned":false"#, with: #""pinned":[1]"#), "CommittedChangeSet").isEmpty, "an array attribute")
        #expect(try !problems(committed.replacingOccurrences(of: #"{"1":{"#, with: #"{"01":{"#), "CommittedChangeSet").isEmpty, "a non-canonical id key")
        #expect(try !problems(committed.replacingOccurrences(of: #""create":[1]"#, with: #""create":[1],"extra":[]"#), "CommittedChangeSet").isEmpty, "an extra list")
        #expect(try !problems(#"{"changeSets":[],"maxRevision":1,"more":"yes"}"#, "SyncResponse").isEmpty, "more as a string")
        #expect(try !problems(#"{"deviceId":"x","name":"a","user":"b","role":"member","created":"2024-01-01T00:00:00Z","lastSeq":0,"lowestTemporaryId":0}"#, "DeviceInfo").isEmpty, "a device id that is no uuid")
        #expect(try !problems(#"{"deviceId":"01a896a3-b51b-4770-85be-acfe8cb7d18a","token":"secret"}"#, "RegisteredDevice").isEmpty, "a token of the wrong form")
        #expect(try !problems(#"{"status":"fine"}"#, "Health").isEmpty, "a health status other than ok")
    }

    @Test func contractRejectsAnswersTheDocumentDoesNotAllow() throws {
        let contract = try OpenAPIContract.load()
        let json = ["content-type": "application/json"]
        func exchange(_ method: String, _ path: String, _ status: Int, _ headers: [String: String], _ body: String) -> [String] {
            contract.problems(for: OpenAPIExchange(method: method, path: path, status: status, headers: headers, body: ByteBuffer(string: body)))
        }
        let unavailable = #"{"error":"unavailable","message":"try later"}"#
        #expect(exchange("GET", "/health", 200, json, #"{"status":"ok"}"#).isEmpty)
        #expect(exchange("GET", "/health", 503, json.merging(["retry-after": "2"]) { $1 }, unavailable).isEmpty)
        #expect(exchange("DELETE", "/devices/abc", 204, [:], "").isEmpty)
        #expect(exchange("GET", "/metrics", 200, ["content-type": "text/plain; version=0.0.4"], "# metrics\n").isEmpty)

        #expect(!exchange("GET", "/health", 418, json, #"{"error":"internal","message":"m"}"#).isEmpty, "an undocumented status")
        #expect(!exchange("GET", "/devices/me", 404, json, #"{"error":"not_found","message":"m"}"#).isEmpty, "404 is not documented for /devices/me")
        #expect(!exchange("GET", "/health", 503, json, unavailable).isEmpty, "503 without Retry-After")
        #expect(!exchange("GET", "/health", 503, json.merging(["retry-after": "soon"]) { $1 }, unavailable).isEmpty, "Retry-After that is no number")
        #expect(!exchange("GET", "/health", 200, ["content-type": "text/html"], "<p>ok</p>").isEmpty, "the wrong content type")
        #expect(!exchange("GET", "/health", 200, json, "ok").isEmpty, "a body that is not JSON")
        #expect(!exchange("DELETE", "/devices/abc", 204, [:], "{}").isEmpty, "a body where the document says none")
        #expect(!exchange("GET", "/nowhere", 200, json, "{}").isEmpty, "a path the document does not have")
        #expect(!exchange("PUT", "/health", 200, json, #"{"status":"ok"}"#).isEmpty, "a method the document does not have")
        #expect(contract.template(for: "/devices/me", method: "GET") == "/devices/me")
        #expect(contract.template(for: "/devices/me", method: "DELETE") == "/devices/{id}")
    }

    @Test func bundledDocumentLoadsAndABrokenOneIsRefused() throws {
        let bundled = try #require(try? OpenAPIDocument.load().get())
        #expect(try OpenAPIJSON.parse(Data(bundled.readableBytesView)).sameValue(as: OpenAPIContract.load().document))
        #expect((try? OpenAPIDocument.parse(Data("{\"openapi\":\"3.0.3\"}".utf8), source: "x").get()) == nil)
        #expect((try? OpenAPIDocument.parse(Data("not json".utf8), source: "x").get()) == nil)
    }
}

extension SyncError {
    /// The body the server sends for this error, with `seq` set as for seq_reused.
    fileprivate func errorBody(seq: Int64) -> ErrorBody {
        var body = self.body
        body.seq = seq
        return body
    }
}
