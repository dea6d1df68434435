/// The type of an attribute's values.
public enum AttributeType: String, Sendable, Hashable, Codable, CaseIterable {
    case string, integer, double, boolean, timestamp
}

/// What happens to a record when the record it references is deleted.
public enum OnDeleteRule: String, Sendable, Hashable, Codable, CaseIterable {
    /// Delete the referencing record too (written into the change set's log entry).
    case cascade
    /// Refuse the delete while a referencing record exists.
    case restrict
    /// Set the reference to null (written into the log entry as an update).
    case setNull = "set null"
}

/// What a role may do with an entity's records.
public struct Permissions: Sendable, Hashable, Codable {
    public var create: Bool
    public var update: Bool
    public var delete: Bool

    public init(create: Bool, update: Bool, delete: Bool) {
        self.create = create
        self.update = update
        self.delete = delete
    }

    public static let none = Permissions(create: false, update: false, delete: false)
    public static let all = Permissions(create: true, update: true, delete: true)
}

public struct AttributeDescription: Sendable, Hashable, Codable {
    public var name: String
    public var type: AttributeType
    public var nullable: Bool
    /// The entity a reference attribute points to (its values are that entity's ids).
    public var references: String?
    public var onDelete: OnDeleteRule?

    public init(name: String, type: AttributeType, nullable: Bool, references: String? = nil, onDelete: OnDeleteRule? = nil) {
        self.name = name
        self.type = type
        self.nullable = nullable
        self.references = references
        self.onDelete = onDelete
    }
}

/// One entity as `GET /schema` shows it, with the calling device's permissions.
public struct EntityDescription: Sendable, Hashable, Codable {
    public var name: String
    public var attributes: [AttributeDescription]
    public var permissions: Permissions

    public init(name: String, attributes: [AttributeDescription], permissions: Permissions) {
        self.name = name
        self.attributes = attributes
        self.permissions = permissions
    }
}

/// The body of `GET /schema`.
public struct SchemaDocument: Sendable, Hashable, Codable {
    public var version: Int
    public var entities: [EntityDescription]

    public init(version: Int, entities: [EntityDescription]) {
        self.version = version
        self.entities = entities
    }
}
