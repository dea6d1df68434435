import RevsyncWire

/// One record's new attribute values and the write history they leave it with.
public struct RecordWrite: Sendable, Hashable {
    public let id: Int64
    public let values: Attributes
    /// The device that writes it (the conflict rule's `writer`).
    public let writer: Int64
    /// The latest revision written by a device other than `writer` (see `RecordVersion`).
    public let otherRevision: Int64

    public init(id: Int64, values: Attributes, writer: Int64, otherRevision: Int64) {
        self.id = id
        self.values = values
        self.writer = writer
        self.otherRevision = otherRevision
    }
}

/// Records of one entity that get the same attributes set: one statement's worth.
public struct AttributeWrite: Sendable, Hashable {
    public let entity: String
    /// The attributes written, the same for every record.
    public let names: [String]
    public var records: [RecordWrite]
}

/// The ids a change set removes from one entity.
public struct RecordDeletes: Sendable, Hashable {
    public let entity: String
    public let ids: [Int64]
}

/// A temporary id a change set created, and the permanent record it became.
public struct CreatedId: Sendable, Hashable {
    public let temporaryId: Int64
    public let entity: String
    public let id: Int64

    public init(temporaryId: Int64, entity: String, id: Int64) {
        self.temporaryId = temporaryId
        self.entity = entity
        self.id = id
    }
}

/// Everything an accepted change set writes, decided before anything is written:
/// storage carries it out in order (inserts, updates, deletes), remembers the
/// created ids, then stamps the next revision on `applied.writtenKeys` and the log entry.
public struct WritePlan: Sendable {
    public let seq: Int64?
    public var inserts: [AttributeWrite] = []
    public var updates: [AttributeWrite] = []
    public var deletes: [RecordDeletes] = []
    public var createdIds: [CreatedId] = []
    /// The log entry's content, cascades included.
    public var applied: AppliedChangeSet
    /// The log entry every device gets, and the author's form, with `JSONWriter.placeholder` for the revision.
    public var body: [UInt8] = []
    public var authorBody: [UInt8] = []

    init(seq: Int64?, types: [String]) {
        self.seq = seq
        self.applied = AppliedChangeSet(seq: seq, types: types)
    }
}
