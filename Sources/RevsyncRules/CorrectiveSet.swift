import RevsyncWire

/// A stored record as it is now: every attribute and its revision.
public struct StoredRecord: Sendable, Hashable {
    public let id: Int64
    public let revision: Int64
    public let values: Attributes

    public init(id: Int64, revision: Int64, values: Attributes) {
        self.id = id
        self.revision = revision
        self.values = values
    }
}

/// The server's true state of the records a rejected change set touched.
public struct CorrectiveSet: Sendable {
    public var seq: Int64?
    public var reason: ConflictReason
    public var types: [String] = []
    /// Records that exist, complete, with the temporary id the device knows them by (if any).
    public var present: [String: [(record: StoredRecord, temporaryId: Int64?)]] = [:]
    /// Ids (permanent or temporary) the device must drop.
    public var absent: [String: [Int64]] = [:]
    /// About how many bytes `encoded` will write, so a reader can stop before a repair grows past its limit.
    public private(set) var approximateBytes = 160

    public init(seq: Int64?, reason: ConflictReason) {
        self.seq = seq
        self.reason = reason
    }

    public mutating func keep(_ entity: String, _ record: StoredRecord, temporaryId: Int64?) {
        if !types.contains(entity) { types.append(entity) }
        guard !(present[entity] ?? []).contains(where: { $0.record.id == record.id }) else { return }
        present[entity, default: []].append((record, temporaryId))
        approximateBytes += 48 + record.values.reduce(0) { $0 + $1.key.utf8.count + $1.value.approximateJSONBytes }
    }

    public mutating func drop(_ entity: String, _ id: Int64) {
        if !types.contains(entity) { types.append(entity) }
        guard !(absent[entity] ?? []).contains(id) else { return }
        absent[entity, default: []].append(id)
        approximateBytes += 21
    }

    /// The corrective set that replaces one too large to send: the rejection with no records,
    /// and `"resync": true`, which tells the device to drop the rejected change set and
    /// bootstrap again from `GET /snapshot`.
    public static func resync(seq: Int64?, reason: ConflictReason, limit: Int) -> [UInt8] {
        var note = reason
        note.message += "; the repair is larger than \(limit) bytes, so it is not sent: drop this change set and bootstrap again from GET /snapshot"
        var out = JSONWriter(capacity: 256)
        writeHead(&out, seq: seq, resync: true, reason: note)
        out.raw(",\"types\":[]}")
        return out.bytes
    }

    /// `{"conflict":true,"seq":…,["resync":true,]"reason":{…}`: what every corrective set begins with.
    static func writeHead(_ out: inout JSONWriter, seq: Int64?, resync: Bool, reason: ConflictReason) {
        out.raw("{\"conflict\":true")
        if let seq {
            out.raw(",\"seq\":")
            out.integer(seq)
        }
        if resync { out.raw(",\"resync\":true") }
        out.raw(",\"reason\":")
        writeReason(&out, reason)
    }

    static func writeReason(_ out: inout JSONWriter, _ reason: ConflictReason) {
        out.raw("{\"code\":")
        out.string(reason.code.rawValue)
        if let entity = reason.entity {
            out.raw(",\"entity\":")
            out.string(entity)
        }
        if let id = reason.id {
            out.raw(",\"id\":")
            out.integer(id)
        }
        out.raw(",\"message\":")
        out.string(reason.message)
        out.byte(UInt8(ascii: "}"))
    }

    /// The corrective change set's JSON. Without a schema, attributes are written in name order.
    public func encoded(schema: DatasetSchema?) -> [UInt8] {
        var out = JSONWriter(capacity: 512)
        Self.writeHead(&out, seq: seq, resync: false, reason: reason)
        out.raw(",\"types\":")
        out.stringArray(types)
        for entity in types {
            let kept = present[entity] ?? []
            let order = schema?.entity(named: entity)?.attributes.map(\.name)
            out.byte(UInt8(ascii: ","))
            out.key(entity)
            out.raw("{\"create\":[],\"update\":")
            out.integerArray(kept.map(\.record.id))
            out.raw(",\"delete\":")
            out.integerArray(absent[entity] ?? [])
            out.raw(",\"attributes\":{")
            for (index, (record, temporaryId)) in kept.enumerated() {
                if index > 0 { out.byte(UInt8(ascii: ",")) }
                out.storedRecord(record, oldId: temporaryId, order: order ?? record.values.keys.sorted())
            }
            out.raw("}}")
        }
        out.byte(UInt8(ascii: "}"))
        return out.bytes
    }
}

extension JSONWriter {
    /// `"id":{"__oldId__":t,"revision":r,"a":…}`: a stored record as answers list it, with its
    /// values in `order` (null for one it lacks). The caller writes the commas between records.
    public mutating func storedRecord(_ record: StoredRecord, oldId: Int64? = nil, order: [String]) {
        byte(UInt8(ascii: "\""))
        integer(record.id)
        raw("\":{")
        if let oldId {
            key(ReservedAttribute.oldId)
            integer(oldId)
            byte(UInt8(ascii: ","))
        }
        raw("\"revision\":")
        integer(record.revision)
        for name in order {
            byte(UInt8(ascii: ","))
            key(name)
            value(record.values[name] ?? .null)
        }
        byte(UInt8(ascii: "}"))
    }
}
