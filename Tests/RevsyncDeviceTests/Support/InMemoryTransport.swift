import Foundation
import RevsyncRules
import RevsyncServer
import RevsyncTestSupport
import RevsyncWire

@testable import RevsyncDevice

/// The real server's rules in-process, as a `SyncTransport`: `SyncService` over in-memory
/// stores (`InMemoryServer`), with the knobs engine tests turn and the counts they check.
/// Errors reach the engine as they would over HTTP, through the transport's error mapper.
actor InMemoryTransport: SyncTransport {
    let server: InMemoryServer
    let adminToken = "admin-token"
    private let seedToken: String
    /// Every /sync request received.
    private(set) var received: [SyncRequest] = []
    /// `GET /snapshot` calls received.
    private(set) var snapshotRequests = 0
    /// `GET /devices/me` calls received.
    private(set) var deviceInfoRequests = 0
    /// Long-polls the transport held: started, and cancelled while held.
    private(set) var longPollsHeld = 0
    private(set) var longPollsCancelled = 0
    /// Whether a long-poll is being held now.
    private(set) var holdingLongPoll = false
    /// Whether `/sync` with `wait` is held until a commit or the wait's end, as the real
    /// server does (off: answered at once, as by a server that does not hold requests).
    private var holdsLongPolls = true
    /// Whether `/sync` with `wait` is refused as `400 invalid_request` (a server that will not wait).
    private var refusesLongPolls = false
    /// Whether `seq_reused` names the first reused seq, as the real server does
    /// (off: the engine must find it by probing).
    private var namesFirstReusedSeq = true
    private var seedSeq: Int64 = 0
    /// `GET /schema` answered with an older document, as by an instance not upgraded yet.
    private var staleSchema: (document: SchemaDocument, calls: Int)?
    /// Registered devices by name: their token and public id.
    private var registered: [String: RegisteredDevice] = [:]

    /// - Parameter schema: the document devices get; its permissions are the role `member`'s.
    ///   Seeding goes through an `admin` that may do everything.
    init(schema: LocalSchema = TestSchema.schema) async throws {
        server = InMemoryServer(schema: Self.datasetSchema(schema.document))
        seedToken = try await server.register(name: "seed", role: "admin").token
    }

    /// The server's schema file for a device's document: role `member` with the document's permissions, `admin` with all.
    static func datasetSchema(_ document: SchemaDocument) -> DatasetSchema {
        func letters(_ permissions: Permissions) -> String {
            (permissions.create ? "c" : "") + (permissions.update ? "u" : "") + (permissions.delete ? "d" : "")
        }
        let entities: [[String: Any]] = document.entities.map { entity in
            [
                "name": entity.name,
                "attributes": entity.attributes.map { attribute -> [String: Any] in
                    var description: [String: Any] = ["name": attribute.name, "type": attribute.type.rawValue, "nullable": attribute.nullable]
                    if let references = attribute.references { description["references"] = references }
                    if let rule = attribute.onDelete { description["onDelete"] = rule.rawValue }
                    return description
                },
                "permissions": ["admin": "cud", "member": letters(entity.permissions)],
            ]
        }
        let file: [String: Any] = ["version": document.version, "roles": ["admin", "member"], "entities": entities]
        do {
            let data = try JSONSerialization.data(withJSONObject: file)
            return try SchemaLoader.load(data: data, file: "test schema")
        } catch {
            fatalError("the test schema does not load as a server schema: \(error)")
        }
    }

    // MARK: Knobs

    func setCatchUpLimit(_ limit: Int) async { await server.configure { $0.catchUpMaxChangeSets = limit } }
    func setRequestLimit(_ limit: Int) async { await server.configure { $0.maxChangeSetsPerRequest = limit } }
    func setRequestOperationLimit(_ limit: Int) async { await server.configure { $0.maxOperationsPerRequest = limit } }
    func setChangeSetOperationLimit(_ limit: Int) async { await server.configure { $0.maxOperationsPerChangeSet = limit } }
    /// A repair over `bytes` is sent as `"resync": true` (`REVSYNC_MAX_CORRECTIVE_BYTES`).
    func setMaxCorrectiveBytes(_ bytes: Int) async { await server.configure { $0.maxCorrectiveBytes = bytes } }
    func setNamesFirstReusedSeq(_ names: Bool) { namesFirstReusedSeq = names }
    /// The next `calls` answers to `GET /schema` are `document`: during a rolling schema upgrade,
    /// an instance not upgraded yet answers while the others' answers use the new names.
    func serveStaleSchema(_ document: SchemaDocument, calls: Int) { staleSchema = (document, calls) }
    func setHoldsLongPolls(_ holds: Bool) { holdsLongPolls = holds }
    func setRefusesLongPolls(_ refuses: Bool) { refusesLongPolls = refuses }

    /// What the device registered as `name` was given: its token and public id.
    func registration(_ name: String) throws -> RegisteredDevice {
        guard let found = registered[name] else { throw DeviceError.notRegistered }
        return found
    }

    /// Drops the log up to the head: every device behind it must bootstrap again.
    func dropLog() { server.dataset.withState { $0.prune(retention: 0) } }

    /// Forgets a device's seq history (as a server restored from an old backup would).
    func forgetSequence(of token: String) async throws {
        let device = try await server.authenticate(token)
        server.dataset.withState { state in
            state.devices[device.id]?.lastSeq = 0
            state.outcomes[device.id] = nil
        }
    }

    /// The server's records of `entity`, as a device should see them.
    func snapshotRecords(_ entity: String) -> [DeviceRecord] {
        let rows = server.dataset.withState { $0.records[entity] ?? [:] }
        return rows.map { DeviceRecord(id: $0.key, revision: $0.value.revision, attributes: $0.value.values) }.sorted { $0.id < $1.id }
    }

    /// Commits a change set of the seeding admin; returns each temporary id's permanent id.
    @discardableResult
    func seed(_ build: (inout ChangeSet) -> Void) async throws -> [Int64: Int64] {
        var given = ChangeSet()
        build(&given)
        seedSeq += 1
        // Tests name their seeds' records -1, -2, …; the server allows a temporary id once per device.
        var (changeSet, renamed) = Self.freshTemporaryIds(given, base: seedSeq * 1_000_000, schema: server.schema)
        changeSet.seq = seedSeq
        var ids: [Int64: Int64] = [:]
        let head = server.dataset.withState { $0.head }
        let response = try await server.sync(SyncRequest(maxRevision: head, changeSets: [changeSet]), token: seedToken)
        guard let ack = response.changeSets.last(where: { $0.seq == seedSeq }), ack.conflict == false else {
            throw DeviceError.unsupportedEdit("seed rejected: \(response.changeSets.last?.reason?.message ?? "no answer")")
        }
        for changes in ack.entities.values {
            for (id, values) in changes.attributes {
                if let old = values[ReservedAttribute.oldId]?.integerValue, let given = renamed[old] { ids[given] = id }
            }
        }
        return ids
    }

    /// `changeSet` with each created temporary id `t` replaced by `-base + t` (references too), and the map back.
    static func freshTemporaryIds(_ changeSet: ChangeSet, base: Int64, schema: DatasetSchema) -> (ChangeSet, [Int64: Int64]) {
        var renamed: [Int64: Int64] = [:]
        for name in changeSet.types {
            for id in changeSet.entities[name]?.create ?? [] where id < 0 { renamed[id] = id - base }
        }
        var copy = ChangeSet(seq: changeSet.seq)
        for name in changeSet.types {
            guard var changes = changeSet.entities[name] else { continue }
            let references = Set(schema.entity(named: name)?.attributes.filter { $0.references != nil }.map(\.name) ?? [])
            changes.create = changes.create.map { renamed[$0] ?? $0 }
            var attributes: [Int64: Attributes] = [:]
            for (id, values) in changes.attributes {
                var values = values
                for key in references {
                    if case .integer(let target)? = values[key], let fresh = renamed[target] { values[key] = .integer(fresh) }
                }
                attributes[renamed[id] ?? id] = values
            }
            changes.attributes = attributes
            copy[name] = changes
        }
        return (copy, Dictionary(uniqueKeysWithValues: renamed.map { ($0.value, $0.key) }))
    }

    // MARK: SyncTransport

    func register(_ registration: DeviceRegistration, adminToken: String) async throws -> RegisteredDevice {
        guard adminToken == self.adminToken else { throw SyncTransportError.unauthorized(message: "not the admin token") }
        let (device, token) = try await server.register(name: registration.name, role: registration.role)
        let answer = RegisteredDevice(deviceId: device.publicId, token: token)
        registered[registration.name] = answer
        return answer
    }

    func device(token: String) async throws -> DeviceInfo {
        deviceInfoRequests += 1
        return try await mapped { try await server.info(token: token) }
    }

    func schema(token: String) async throws -> SchemaDocument {
        if let stale = staleSchema, stale.calls > 0 {
            staleSchema = (stale.document, stale.calls - 1)
            return stale.document
        }
        return try await mapped { try await server.schemaDocument(token: token) }
    }

    func snapshot(token: String) async throws -> SyncResponse {
        snapshotRequests += 1
        return try await mapped { try await server.snapshot(token: token) }
    }

    func sync(_ request: SyncRequest, token: String) async throws -> SyncResponse {
        received.append(request)
        if let wait = request.wait, wait > 0, refusesLongPolls {
            throw SyncTransportError.rejected(status: 400, code: "invalid_request", message: "wait is not allowed here")
        }
        if let wait = request.wait, wait > 0, request.changeSets.isEmpty, holdsLongPolls {
            try await holdLongPoll(after: request.maxRevision, for: .seconds(wait))
        }
        // The wait is this transport's to model: the rules answer at once.
        let plain = SyncRequest(maxRevision: request.maxRevision, changeSets: request.changeSets)
        return try await mapped { try await server.sync(plain, token: token) }
    }

    /// Returns once something is committed after `revision` or `wait` has passed, as the
    /// server holds a long-poll; throws `CancellationError` when the caller gives up.
    private func holdLongPoll(after revision: Int64, for wait: Duration) async throws {
        longPollsHeld += 1
        holdingLongPoll = true
        defer { holdingLongPoll = false }
        let deadline = ContinuousClock.now + wait
        do {
            while server.dataset.withState({ $0.head }) <= revision, ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(5))
            }
        } catch {
            longPollsCancelled += 1
            throw error
        }
    }

    /// A refusal as the engine sees it over HTTP: the contract's error body through the transport's mapper.
    private func mapped<T: Sendable>(_ body: @Sendable () async throws -> T) async throws -> T {
        do {
            return try await body()
        } catch let refusal as SyncRefusal {
            let error = ErrorBody(
                error: refusal.code.rawValue, message: refusal.message, expected: refusal.expected,
                lowestTemporaryId: refusal.lowestTemporaryId, seq: namesFirstReusedSeq ? refusal.seq : nil)
            throw ErrorResponseMapper.error(
                status: refusal.code.status, body: Array(try JSONEncoder().encode(error)), retryAfter: refusal.retryAfterSeconds.map(String.init))
        }
    }
}
