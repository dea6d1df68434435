import RevsyncWire

/// The dataset's schema as loaded and checked from `Config/`.
public struct DatasetSchema: Sendable, Hashable {
    public let version: Int
    public let roles: [String]
    /// Entities in the order of the schema file.
    public let entities: [Entity]
    private let index: [String: Int]

    public init(version: Int, roles: [String], entities: [Entity]) {
        self.version = version
        self.roles = roles
        self.entities = entities
        self.index = Dictionary(uniqueKeysWithValues: entities.enumerated().map { ($1.name, $0) })
    }

    public func entity(named name: String) -> Entity? {
        index[name].map { entities[$0] }
    }

    /// The first entity or attribute `changeSets` name that this schema lacks (`entity` or
    /// `entity.attribute`), if any: what a newer schema of the dataset may have.
    public func firstUnknownName(in changeSets: [ChangeSet]) -> String? {
        for changeSet in changeSets {
            for (name, changes) in changeSet.entities {
                guard let entity = entity(named: name) else { return name }
                for values in changes.attributes.values {
                    for attribute in values.keys where attribute != ReservedAttribute.revision && attribute != ReservedAttribute.oldId {
                        if entity.attribute(named: attribute) == nil { return "\(name).\(attribute)" }
                    }
                }
            }
        }
        return nil
    }

    /// Every attribute, in any entity, that references `entity`.
    public func references(to entity: String) -> [Relation] {
        entities.flatMap { child in
            child.attributes.filter { $0.references == entity }.compactMap { Relation(child: child.name, reference: $0) }
        }
    }

    /// The schema as `GET /schema` shows it to a device with `role`.
    public func document(for role: String) -> SchemaDocument {
        SchemaDocument(
            version: version,
            entities: entities.map {
                EntityDescription(name: $0.name, attributes: $0.attributes, permissions: $0.permissions(for: role))
            })
    }
}

/// One entity: its typed attributes and what each role may do.
public struct Entity: Sendable, Hashable {
    public let name: String
    public let attributes: [AttributeDescription]
    public let permissionsByRole: [String: Permissions]

    public init(name: String, attributes: [AttributeDescription], permissionsByRole: [String: Permissions]) {
        self.name = name
        self.attributes = attributes
        self.permissionsByRole = permissionsByRole
    }

    public func attribute(named name: String) -> AttributeDescription? {
        attributes.first { $0.name == name }
    }

    /// Roles the schema does not mention may do nothing.
    public func permissions(for role: String) -> Permissions {
        permissionsByRole[role] ?? .none
    }
}
