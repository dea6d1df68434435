import RevsyncWire

@testable import RevsyncDevice

/// An in-process stand-in for the Revsync server, following PROTOCOL.md closely
/// enough to exercise the engine: revisions, per-device `seq` idempotency and
/// temporary id maps, `seq_reused` for a seq sent again with other content,
/// `GET /devices/me`, the conflict rule, the role's permissions (for every
/// device but the seeding one), cascades, corrective sets (a repair over a
/// settable number of records becomes a `resync` corrective), operation limits,
/// catch-up limits (`more`), a retained-log horizon (410) and snapshots.
///
/// It is a test double for engine tests only; the real server's behaviour is
/// covered by the integration tests against it.
actor FakeSyncServer: SyncTransport {
    struct Stored: Sendable {
        var revision: Int64
        var values: Attributes
        var writer: String
        var otherRevision: Int64
    }

    struct Device: Sendable {
        var handledSeq: Int64 = 0
        var outcomes: [Int64: Outcome] = [:]
        var temporaryIds: [Int64: TemporaryIdMapping] = [:]
        /// What each handled seq named, in canonical form (see `canonical`): a seq
        /// sent again with other content is refused as `seq_reused`.
        var contents: [Int64: ChangeSet] = [:]

        var lowestTemporaryId: Int64 { temporaryIds.keys.min() ?? 0 }
    }

    enum Outcome: Sendable {
        case committed(revision: Int64)
        case rejected(ChangeSet, ConflictReason)
    }

    struct LogEntry: Sendable {
        var revision: Int64
        var author: String
        /// The author's form: `seq` and `__oldId__` included.
        var changeSet: ChangeSet
    }

    let schema: LocalSchema
    let adminToken = "admin-token"
    private(set) var records: [String: [Int64: Stored]] = [:]
    private(set) var log: [LogEntry] = []
    private(set) var head: Int64 = 0
    /// A request must have `maxRevision >= horizon` (the log before it is dropped).
    private(set) var horizon: Int64 = 0
    private var devices: [String: Device] = [:]
    private var nextId: Int64 = 100
    /// Most catch-up change sets per response.
    var catchUpLimit: Int?
    /// Most change sets per request before 413.
    var requestLimit: Int?
    /// Most operations in all change sets of a request before 413.
    var requestOperationLimit: Int?
    /// Most operations in one change set; past it the set is rejected as `invalid`.
    var changeSetOperationLimit: Int?
    /// Most records in one corrective set; a larger repair is sent as `"resync": true`
    /// with no records (the real server counts bytes: `REVSYNC_MAX_CORRECTIVE_BYTES`).
    var correctiveRecordLimit: Int?
    /// `GET /snapshot` calls received.
    private(set) var snapshotRequests = 0
    /// Every /sync request received.
    private(set) var received: [SyncRequest] = []
    /// `GET /devices/me` calls received.
    private(set) var deviceInfoRequests = 0
    /// Whether `seq_reused` names the first reused seq, as the real server does
    /// (off: the engine must find it by probing).
    var namesFirstReusedSeq = true

    init(schema: LocalSchema = TestSchema.schema) {
        self.schema = schema
    }

    func setCatchUpLimit(_ limit: Int?) { catchUpLimit = limit }
    func setRequestLimit(_ limit: Int?) { requestLimit = limit }
    func setRequestOperationLimit(_ limit: Int?) { requestOperationLimit = limit }
    func setChangeSetOperationLimit(_ limit: Int?) { changeSetOperationLimit = limit }
    func setCorrectiveRecordLimit(_ limit: Int?) { correctiveRecordLimit = limit }
    func setNamesFirstReusedSeq(_ names: Bool) { namesFirstReusedSeq = names }

    /// Drops the log up to the head: every device behind it must bootstrap again.
    func dropLog() { horizon = head }

    /// Forgets a device's seq history (as a server restored from an old backup would).
    func forgetSequence(of token: String) {
        devices[token]?.handledSeq = 0
        devices[token]?.outcomes = [:]
        devices[token]?.contents = [:]
    }

    /// Adds a device directly, returning its token.
    func addDevice(_ name: String) -> String {
        let token = "token-\(name)"
        devices[token] = Device()
        return token
    }

    /// The server's records of `entity`, as a device should see them.
    func snapshotRecords(_ entity: String) -> [DeviceRecord] {
        (records[entity] ?? [:]).map { DeviceRecord(id: $0.key, revision: $0.value.revision, attributes: $0.value.values) }
            .sorted { $0.id < $1.id }
    }

    /// Commits a change set of an "admin" author (seeding); returns each temporary id's permanent id.
    @discardableResult
    func seed(_ build: (inout ChangeSet) -> Void) throws -> [Int64: Int64] {
        var changeSet = ChangeSet()
        build(&changeSet)
        guard case .committed(let revision) = try process(changeSet, device: Self.seedDevice),
            let entry = log.first(where: { $0.revision == revision })
        else { throw DeviceError.unsupportedEdit("seed rejected") }
        var ids: [Int64: Int64] = [:]
        for changes in entry.changeSet.entities.values {
            for (id, values) in changes.attributes {
                if let old = values[ReservedAttribute.oldId]?.integerValue { ids[old] = id }
            }
        }
        return ids
    }

    // MARK: SyncTransport

    func register(_ registration: DeviceRegistration, adminToken: String) async throws -> RegisteredDevice {
        guard adminToken == self.adminToken else { throw SyncTransportError.unauthorized(message: "not the admin token") }
        let token = addDevice(registration.name)
        return RegisteredDevice(deviceId: registration.name, token: token)
    }

    func device(token: String) async throws -> DeviceInfo {
        deviceInfoRequests += 1
        guard let device = devices[token] else { throw SyncTransportError.unauthorized(message: "unknown token") }
        let name = String(token.dropFirst("token-".count))
        return DeviceInfo(
            deviceId: name, name: name, user: name, role: "member", created: "2024-01-01T00:00:00Z", lastSeen: nil,
            lastSeq: device.handledSeq, lowestTemporaryId: device.lowestTemporaryId)
    }

    func schema(token: String) async throws -> SchemaDocument {
        guard devices[token] != nil else { throw SyncTransportError.unauthorized(message: "unknown token") }
        return schema.document
    }

    func snapshot(token: String) async throws -> SyncResponse {
        guard devices[token] != nil else { throw SyncTransportError.unauthorized(message: "unknown token") }
        snapshotRequests += 1
        var changeSet = ChangeSet()
        for entity in schema.entities.map(\.name) {
            for record in snapshotRecords(entity) {
                var values = record.attributes
                values[ReservedAttribute.revision] = .integer(record.revision)
                changeSet.create(entity, record.id, values)
            }
        }
        return SyncResponse(maxRevision: head, changeSets: [changeSet])
    }

    func sync(_ request: SyncRequest, token: String) async throws -> SyncResponse {
        received.append(request)
        guard var device = devices[token] else { throw SyncTransportError.unauthorized(message: "unknown token") }
        if let requestLimit, request.changeSets.count > requestLimit { throw SyncTransportError.tooLarge(message: "too many change sets") }
        if let requestOperationLimit, request.changeSets.reduce(0, { $0 + $1.operationCount }) > requestOperationLimit {
            throw SyncTransportError.tooLarge(message: "too many operations")
        }
        guard request.maxRevision <= head else { throw SyncTransportError.revisionAhead(message: "ahead of \(head)") }
        guard request.maxRevision >= horizon else { throw SyncTransportError.snapshotRequired(message: "behind \(horizon)") }
        var expected = device.handledSeq + 1
        for changeSet in request.changeSets {
            guard let seq = changeSet.seq, seq > device.handledSeq else { continue }
            guard seq == expected else { throw SyncTransportError.sequenceGap(expected: expected, message: "gap") }
            expected += 1
        }
        for changeSet in request.changeSets {
            guard let seq = changeSet.seq, seq <= device.handledSeq else { continue }
            guard device.contents[seq] == canonical(changeSet, map: device.temporaryIds) else {
                throw SyncTransportError.seqReused(
                    expected: device.handledSeq + 1, lowestTemporaryId: device.lowestTemporaryId,
                    firstReused: namesFirstReusedSeq ? seq : nil, message: "seq \(seq) named other content")
            }
        }

        var repeatedAcks: [ChangeSet] = []
        var correctives: [ChangeSet] = []
        for changeSet in request.changeSets {
            let seq = changeSet.seq ?? 0
            if changeSet.seq != nil, seq <= device.handledSeq {
                switch device.outcomes[seq] {
                case .committed(let revision)?:
                    if revision <= request.maxRevision, let entry = log.first(where: { $0.revision == revision }) {
                        repeatedAcks.append(entry.changeSet)
                    }
                case .rejected(let original, let reason)?:
                    correctives.append(corrective(for: original, reason: reason, device: device))
                case nil:
                    continue
                }
                continue
            }
            if changeSet.seq != nil { device.contents[seq] = canonical(changeSet, map: device.temporaryIds) }
            devices[token] = device
            let outcome = try process(changeSet, device: token)
            device = devices[token] ?? device
            if changeSet.seq != nil {
                device.handledSeq = seq
                device.outcomes[seq] = outcome
            }
            if case .rejected(let original, let reason) = outcome {
                correctives.append(corrective(for: original, reason: reason, device: device))
            }
        }
        devices[token] = device

        var catchUp = log.filter { $0.revision > request.maxRevision }
        var more: Bool?
        if let catchUpLimit, catchUp.count > catchUpLimit {
            catchUp = Array(catchUp.prefix(catchUpLimit))
            more = true
        }
        let maxRevision = more == true ? (catchUp.last?.revision ?? request.maxRevision) : head
        let committed = catchUp.map { $0.author == token ? $0.changeSet : Self.foreignForm($0.changeSet) }
        return SyncResponse(maxRevision: maxRevision, changeSets: repeatedAcks + committed + correctives, more: more)
    }

    // MARK: Applying a change set

    private struct Rejection: Error {
        var reason: ConflictReason
    }

    /// Applies one change set whole or not at all.
    private func process(_ changeSet: ChangeSet, device token: String) throws -> Outcome {
        let saved = records
        var map = devices[token]?.temporaryIds ?? [:]
        do {
            guard changeSet.entities.values.contains(where: { !$0.isEmpty }) else {
                throw Rejection(reason: ConflictReason(code: .invalid, entity: nil, id: nil, message: "a change set with no operations"))
            }
            if let changeSetOperationLimit, changeSet.operationCount > changeSetOperationLimit {
                throw Rejection(reason: ConflictReason(
                    code: .invalid, entity: nil, id: nil,
                    message: "\(changeSet.operationCount) operations; the limit is \(changeSetOperationLimit)"))
            }
            try checkPermissions(changeSet, device: token)
            let revision = head + 1
            var entry = ChangeSet(seq: changeSet.seq, conflict: false, revision: revision)
            var created: [Int64: TemporaryIdMapping] = [:]
            for entity in changeSet.types {
                for id in changeSet.entities[entity]?.create ?? [] {
                    nextId += 1
                    created[id] = TemporaryIdMapping(entity: entity, permanentId: nextId)
                }
            }
            func resolve(_ entity: String, _ id: Int64) throws -> Int64 {
                guard id < 0 else { return id }
                guard let mapping = created[id] ?? map[id], mapping.entity == entity else {
                    throw Rejection(reason: ConflictReason(code: .reference, entity: entity, id: id, message: "unknown temporary id \(id)"))
                }
                return mapping.permanentId
            }
            func values(_ entity: String, _ given: Attributes, id: Int64) throws -> Attributes {
                var result: Attributes = [:]
                for (name, value) in given where name != ReservedAttribute.revision {
                    guard let attribute = schema.attribute(entity, name) else {
                        throw Rejection(reason: ConflictReason(code: .invalid, entity: entity, id: id, message: "unknown attribute \(name)"))
                    }
                    var checked: JSONValue
                    do { checked = try schema.validated(value, for: attribute, of: entity) } catch {
                        throw Rejection(reason: ConflictReason(code: .invalid, entity: entity, id: id, message: "\(error)"))
                    }
                    if let target = attribute.references, case .integer(let referenced) = checked {
                        let resolved = try resolve(target, referenced)
                        guard records[target]?[resolved] != nil else {
                            throw Rejection(reason: ConflictReason(code: .reference, entity: entity, id: id, message: "\(target) \(resolved) does not exist"))
                        }
                        checked = .integer(resolved)
                    }
                    result[name] = checked
                }
                return result
            }
            func check(_ entity: String, _ id: Int64, _ given: Attributes?) throws -> Int64 {
                let resolved = try resolve(entity, id)
                guard let stored = records[entity]?[resolved] else {
                    throw Rejection(reason: ConflictReason(code: .notFound, entity: entity, id: id, message: "gone"))
                }
                let basis = given?[ReservedAttribute.revision]?.integerValue ?? -1
                let foreign = stored.writer == token ? stored.otherRevision : stored.revision
                guard stored.revision == basis || foreign <= basis else {
                    throw Rejection(reason: ConflictReason(code: .staleRevision, entity: entity, id: resolved, message: "stale"))
                }
                return resolved
            }
            func write(_ entity: String, _ id: Int64, _ newValues: Attributes, creating: Bool) {
                var stored = records[entity]?[id] ?? Stored(revision: 0, values: [:], writer: token, otherRevision: 0)
                if creating { stored.values = schema.completeAttributes(newValues, of: entity) } else { stored.values.merge(newValues) { _, new in new } }
                stored.otherRevision = creating ? 0 : (stored.writer == token ? stored.otherRevision : stored.revision)
                stored.writer = token
                stored.revision = revision
                records[entity, default: [:]][id] = stored
            }
            // Creates (references among them resolve through `created`: insert all first).
            for entity in changeSet.types {
                guard let changes = changeSet.entities[entity] else { continue }
                guard schema.entityIfKnown(entity) != nil else {
                    throw Rejection(reason: ConflictReason(code: .invalid, entity: entity, id: nil, message: "unknown entity"))
                }
                for id in changes.create {
                    guard let permanent = created[id]?.permanentId else { continue }
                    records[entity, default: [:]][permanent] = Stored(revision: revision, values: [:], writer: token, otherRevision: 0)
                }
            }
            for entity in changeSet.types {
                guard let changes = changeSet.entities[entity] else { continue }
                for id in changes.create {
                    guard let permanent = created[id]?.permanentId else { continue }
                    let given = try values(entity, changes.attributes[id] ?? [:], id: id)
                    write(entity, permanent, given, creating: true)
                    var sent = records[entity]?[permanent]?.values ?? [:]
                    sent[ReservedAttribute.revision] = .integer(revision)
                    sent[ReservedAttribute.oldId] = .integer(id)
                    entry.create(entity, permanent, sent)
                }
            }
            for entity in changeSet.types {
                guard let changes = changeSet.entities[entity] else { continue }
                for id in changes.update {
                    let resolved = try check(entity, id, changes.attributes[id])
                    let given = try values(entity, changes.attributes[id] ?? [:], id: id)
                    write(entity, resolved, given, creating: false)
                    var sent = given
                    sent[ReservedAttribute.revision] = .integer(revision)
                    entry.update(entity, resolved, sent)
                }
            }
            for entity in changeSet.types {
                guard let changes = changeSet.entities[entity] else { continue }
                for id in changes.delete {
                    let resolved = try check(entity, id, changes.attributes[id])
                    try deleteCascading(entity, resolved, revision: revision, token: token, entry: &entry)
                }
            }
            for (temporaryId, mapping) in created { map[temporaryId] = mapping }
            devices[token]?.temporaryIds = map
            head = revision
            log.append(LogEntry(revision: revision, author: token, changeSet: entry))
            return .committed(revision: revision)
        } catch let rejection as Rejection {
            records = saved
            return .rejected(changeSet, rejection.reason)
        }
    }

    /// The device that seeds the server: an admin, whose change sets skip the permission check.
    static let seedDevice = "seed"

    /// The schema's permissions are the role of every device but the seeding one.
    private func checkPermissions(_ changeSet: ChangeSet, device token: String) throws {
        guard token != Self.seedDevice else { return }
        for entity in changeSet.types {
            guard let changes = changeSet.entities[entity], let permissions = schema.entityIfKnown(entity)?.permissions else { continue }
            let operations = [
                ("create", changes.create, permissions.create), ("update", changes.update, permissions.update),
                ("delete", changes.delete, permissions.delete),
            ]
            for (operation, ids, allowed) in operations where !allowed && !ids.isEmpty {
                throw Rejection(reason: ConflictReason(
                    code: .forbidden, entity: entity, id: ids[0], message: "role \"member\" may not \(operation) \(entity)"))
            }
        }
    }

    private func deleteCascading(_ entity: String, _ id: Int64, revision: Int64, token: String, entry: inout ChangeSet) throws {
        guard records[entity]?.removeValue(forKey: id) != nil else { return }
        entry.delete(entity, id)
        for relation in schema.relations(to: entity) {
            let children = (records[relation.child] ?? [:]).filter { $0.value.values[relation.attribute] == .integer(id) }.keys.sorted()
            for child in children {
                switch relation.rule {
                case .cascade:
                    if token != Self.seedDevice, schema.entityIfKnown(relation.child)?.permissions.delete == false {
                        throw Rejection(reason: ConflictReason(
                            code: .forbidden, entity: entity, id: id, message: "role \"member\" may not delete \(relation.child)"))
                    }
                    try deleteCascading(relation.child, child, revision: revision, token: token, entry: &entry)
                case .setNull:
                    records[relation.child]?[child]?.values[relation.attribute] = .null
                    records[relation.child]?[child]?.revision = revision
                    entry.update(relation.child, child, [relation.attribute: .null, ReservedAttribute.revision: .integer(revision)])
                case .restrict:
                    throw Rejection(reason: ConflictReason(code: .reference, entity: entity, id: id, message: "restricted by \(relation.child) \(child)"))
                }
            }
        }
    }

    /// The corrective set for a rejected change set: every record it touched and
    /// the records referencing the ones it deleted (through cascades recursively,
    /// one level through set null and restrict), as they are now. One of more than
    /// `correctiveRecordLimit` records is replaced by a `resync` corrective, as the
    /// real server does past its byte limit.
    private func corrective(for changeSet: ChangeSet, reason: ConflictReason, device: Device) -> ChangeSet {
        var result = ChangeSet(seq: changeSet.seq, conflict: true, reason: reason)
        var reported: Set<RecordKey> = []
        func report(_ entity: String, _ sentId: Int64) {
            let mapping = sentId < 0 ? device.temporaryIds[sentId] : nil
            let id = mapping?.permanentId ?? sentId
            guard reported.insert(RecordKey(entity, id)).inserted else { return }
            if id > 0, let stored = records[entity]?[id] {
                var values = stored.values
                values[ReservedAttribute.revision] = .integer(stored.revision)
                if mapping != nil { values[ReservedAttribute.oldId] = .integer(sentId) }
                result.update(entity, id, values)
            } else {
                result.delete(entity, sentId)
            }
        }
        func reportReferencing(_ entity: String, _ id: Int64) {
            for relation in schema.relations(to: entity) {
                let children = (records[relation.child] ?? [:]).filter { $0.value.values[relation.attribute] == .integer(id) }.keys.sorted()
                for child in children {
                    let first = !reported.contains(RecordKey(relation.child, child))
                    report(relation.child, child)
                    if first, relation.rule == .cascade { reportReferencing(relation.child, child) }
                }
            }
        }
        for entity in changeSet.types {
            guard let changes = changeSet.entities[entity] else { continue }
            for id in changes.create { report(entity, id) }
            for id in changes.update { report(entity, id) }
            for id in changes.delete {
                report(entity, id)
                reportReferencing(entity, id < 0 ? (device.temporaryIds[id]?.permanentId ?? id) : id)
            }
        }
        if let correctiveRecordLimit, reported.count > correctiveRecordLimit {
            var note = reason
            note.message += "; the repair is larger than \(correctiveRecordLimit) records, so it is not sent:"
                + " drop this change set and bootstrap again from GET /snapshot"
            return ChangeSet(seq: changeSet.seq, conflict: true, reason: note, resync: true)
        }
        return result
    }

    /// A change set as the server compares it with what a seq named before: no
    /// `seq`, and temporary ids that earlier change sets mapped resolved (the
    /// device rewrites them in a retry). Its own creates keep their temporary ids.
    private func canonical(_ changeSet: ChangeSet, map: [Int64: TemporaryIdMapping]) -> ChangeSet {
        var copy = changeSet
        copy.seq = nil
        let created = Set(changeSet.entities.values.flatMap(\.create))
        return IdRewriter.rewrite(copy, schema: schema) { entity, id in
            guard !created.contains(id), let mapping = map[id], mapping.entity == entity else { return nil }
            return mapping.permanentId
        }
    }

    /// A log entry as other devices see it: no `seq`, no `__oldId__`.
    static func foreignForm(_ changeSet: ChangeSet) -> ChangeSet {
        var copy = changeSet
        copy.seq = nil
        for entity in copy.types {
            guard var changes = copy.entities[entity] else { continue }
            for id in changes.attributes.keys { changes.attributes[id]?[ReservedAttribute.oldId] = nil }
            copy.entities[entity] = changes
        }
        return copy
    }
}
