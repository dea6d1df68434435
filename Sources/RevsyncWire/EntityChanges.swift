/// The operations of one change set on one entity.
public struct EntityChanges: Sendable, Hashable {
    /// Negative temporary ids of new records (in requests), or their permanent ids (in responses).
    public var create: [Int64]
    public var update: [Int64]
    public var delete: [Int64]
    /// Attributes per record id.
    public var attributes: [Int64: Attributes]

    public init(create: [Int64] = [], update: [Int64] = [], delete: [Int64] = [], attributes: [Int64: Attributes] = [:]) {
        self.create = create
        self.update = update
        self.delete = delete
        self.attributes = attributes
    }

    public var isEmpty: Bool { create.isEmpty && update.isEmpty && delete.isEmpty }
}

extension EntityChanges: Codable {
    enum CodingKeys: String, CodingKey {
        case create, update, delete, attributes
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        create = try container.decodeIfPresent([Int64].self, forKey: .create) ?? []
        update = try container.decodeIfPresent([Int64].self, forKey: .update) ?? []
        delete = try container.decodeIfPresent([Int64].self, forKey: .delete) ?? []
        attributes = [:]
        guard container.contains(.attributes) else { return }
        let byId = try container.nestedContainer(keyedBy: DynamicCodingKey.self, forKey: .attributes)
        for key in byId.allKeys {
            // Ids are decimal strings on the wire; anything else is an envelope error.
            // Only the canonical decimal form: "010" and "+10" would silently collide with "10".
            guard let id = Int64(key.stringValue), String(id) == key.stringValue else {
                throw DecodingError.dataCorruptedError(
                    forKey: key, in: byId,
                    debugDescription: "attribute key \"\(key.stringValue)\" is not a record id (a decimal integer)")
            }
            attributes[id] = try byId.decode(Attributes.self, forKey: key)
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(create, forKey: .create)
        try container.encode(update, forKey: .update)
        try container.encode(delete, forKey: .delete)
        var byId = container.nestedContainer(keyedBy: DynamicCodingKey.self, forKey: .attributes)
        for (id, values) in attributes.sorted(by: { $0.key < $1.key }) {
            try byId.encode(values, forKey: DynamicCodingKey(String(id)))
        }
    }
}
