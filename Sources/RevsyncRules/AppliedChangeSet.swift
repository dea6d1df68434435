import RevsyncWire

public struct CreatedRecord: Sendable, Hashable {
    public let id: Int64
    public let temporaryId: Int64
    /// Every attribute, references resolved to permanent ids.
    public let values: Attributes

    public init(id: Int64, temporaryId: Int64, values: Attributes) {
        self.id = id
        self.temporaryId = temporaryId
        self.values = values
    }
}

public struct UpdatedRecord: Sendable, Hashable {
    public let id: Int64
    /// The changed attributes only.
    public var values: Attributes
}

/// What one committed change set wrote, cascades included: the content of its log entry.
public struct AppliedChangeSet: Sendable, Hashable {
    public var seq: Int64?
    /// Entities in order of first appearance.
    public private(set) var types: [String] = []
    public private(set) var created: [String: [CreatedRecord]] = [:]
    public private(set) var updated: [String: [UpdatedRecord]] = [:]
    public private(set) var deleted: [String: [Int64]] = [:]

    public init(seq: Int64?, types: [String]) {
        self.seq = seq
        self.types = types
    }

    private mutating func note(_ entity: String) {
        if !types.contains(entity) { types.append(entity) }
    }

    public mutating func create(_ entity: String, _ record: CreatedRecord) {
        note(entity)
        created[entity, default: []].append(record)
    }

    /// Records an update; a second update of the same record (a set-null cascade
    /// on a record the set also updates) merges into the first.
    public mutating func update(_ entity: String, id: Int64, values: Attributes) {
        note(entity)
        if let index = updated[entity]?.firstIndex(where: { $0.id == id }) {
            updated[entity]?[index].values.merge(values) { _, new in new }
        } else {
            updated[entity, default: []].append(UpdatedRecord(id: id, values: values))
        }
    }

    public mutating func delete(_ entity: String, id: Int64) {
        note(entity)
        deleted[entity, default: []].append(id)
    }

    /// Every record key the set writes, for stamping revisions.
    public var writtenKeys: [RecordKey] {
        var keys: [RecordKey] = []
        for entity in types {
            keys += (created[entity] ?? []).map { RecordKey(entity, $0.id) }
            keys += (updated[entity] ?? []).map { RecordKey(entity, $0.id) }
        }
        return keys
    }
}
