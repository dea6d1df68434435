/// One transactional change set: a device's pending change in a request, or a
/// committed revision (or a corrective set) in a response.
public struct ChangeSet: Sendable, Hashable {
    /// The device's counter for its change sets (requests, and echoed in acknowledgements).
    public var seq: Int64?
    /// `false` for committed change sets, `true` for corrective ones (responses only).
    public var conflict: Bool?
    /// The revision a committed change set became (responses only).
    public var revision: Int64?
    /// Why a change set was rejected (corrective sets only).
    public var reason: ConflictReason?
    /// `true` on a corrective set whose repair was too large to send: the device drops the
    /// rejected change set and bootstraps again from `GET /snapshot`, keeping its other pending ones.
    public var resync: Bool?
    /// Entity names in the order they appear.
    public var types: [String]
    /// The operations per entity name.
    public var entities: [String: EntityChanges]

    public init(
        seq: Int64? = nil, conflict: Bool? = nil, revision: Int64? = nil, reason: ConflictReason? = nil,
        resync: Bool? = nil, types: [String] = [], entities: [String: EntityChanges] = [:]
    ) {
        self.seq = seq
        self.conflict = conflict
        self.revision = revision
        self.reason = reason
        self.resync = resync
        self.types = types
        self.entities = entities
    }

    /// The changes of `entity`, creating an empty entry (and listing the type) on first use.
    public subscript(entity: String) -> EntityChanges {
        get { entities[entity] ?? EntityChanges() }
        set {
            if entities[entity] == nil { types.append(entity) }
            entities[entity] = newValue
        }
    }

    /// Keys of a change set object that are not entity names.
    public static let reservedKeys: Set<String> = ["seq", "conflict", "revision", "reason", "resync", "types"]
}

extension ChangeSet: Codable {
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: DynamicCodingKey.self)
        func key(_ name: String) -> DynamicCodingKey { DynamicCodingKey(name) }
        seq = try container.decodeIfPresent(Int64.self, forKey: key("seq"))
        conflict = try container.decodeIfPresent(Bool.self, forKey: key("conflict"))
        revision = try container.decodeIfPresent(Int64.self, forKey: key("revision"))
        reason = try container.decodeIfPresent(ConflictReason.self, forKey: key("reason"))
        resync = try container.decodeIfPresent(Bool.self, forKey: key("resync"))
        types = try container.decodeIfPresent([String].self, forKey: key("types")) ?? []
        entities = [:]
        let listed = Set(types)
        guard listed.count == types.count else {
            throw DecodingError.dataCorruptedError(
                forKey: key("types"), in: container, debugDescription: "\"types\" lists an entity twice")
        }
        for name in types {
            guard container.contains(key(name)) else {
                throw DecodingError.dataCorruptedError(
                    forKey: key(name), in: container,
                    debugDescription: "\"types\" lists \"\(name)\" but the change set has no \"\(name)\" object")
            }
            entities[name] = try container.decode(EntityChanges.self, forKey: key(name))
        }
        for extra in container.allKeys where !listed.contains(extra.stringValue) && !Self.reservedKeys.contains(extra.stringValue) {
            throw DecodingError.dataCorruptedError(
                forKey: extra, in: container,
                debugDescription: "the change set has an \"\(extra.stringValue)\" object that \"types\" does not list")
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: DynamicCodingKey.self)
        try container.encodeIfPresent(conflict, forKey: DynamicCodingKey("conflict"))
        try container.encodeIfPresent(revision, forKey: DynamicCodingKey("revision"))
        try container.encodeIfPresent(seq, forKey: DynamicCodingKey("seq"))
        try container.encodeIfPresent(reason, forKey: DynamicCodingKey("reason"))
        try container.encodeIfPresent(resync, forKey: DynamicCodingKey("resync"))
        try container.encode(types, forKey: DynamicCodingKey("types"))
        for name in types {
            try container.encode(entities[name] ?? EntityChanges(), forKey: DynamicCodingKey(name))
        }
    }
}
