import RevsyncRules
import RevsyncWire

/// The dataset's schema as the device uses it: `GET /schema`'s document, checked
/// once and indexed for lookups by name and for the references between entities.
public struct LocalSchema: Sendable, Hashable {
    public let document: SchemaDocument
    private let entityIndex: [String: Int]
    private let attributeIndex: [String: [String: AttributeDescription]]
    private let referenceIndex: [String: [AttributeDescription]]
    private let incoming: [String: [Relation]]

    public init(_ document: SchemaDocument) throws(DeviceError) {
        var entityIndex: [String: Int] = [:]
        var attributeIndex: [String: [String: AttributeDescription]] = [:]
        var referenceIndex: [String: [AttributeDescription]] = [:]
        for (index, entity) in document.entities.enumerated() {
            // The server's name rules, and SQLite's own table names.
            guard SchemaNames.isIdentifier(entity.name), !SchemaNames.isReservedEntityName(entity.name), !entity.name.hasPrefix("sqlite_") else {
                throw .invalidSchema("entity name \"\(entity.name)\" is not lowercase letters, digits and _, or is reserved")
            }
            guard entityIndex.updateValue(index, forKey: entity.name) == nil else {
                throw .invalidSchema("entity \"\(entity.name)\" appears twice")
            }
            var attributes: [String: AttributeDescription] = [:]
            for attribute in entity.attributes {
                guard SchemaNames.isIdentifier(attribute.name), !SchemaNames.isReservedAttributeName(attribute.name) else {
                    throw .invalidSchema("attribute name \"\(attribute.name)\" of \(entity.name) is not usable")
                }
                guard attributes.updateValue(attribute, forKey: attribute.name) == nil else {
                    throw .invalidSchema("attribute \"\(attribute.name)\" of \(entity.name) appears twice")
                }
                if attribute.references != nil {
                    guard attribute.type == .integer else {
                        throw .invalidSchema("reference \"\(attribute.name)\" of \(entity.name) must be an integer")
                    }
                    referenceIndex[entity.name, default: []].append(attribute)
                }
            }
            attributeIndex[entity.name] = attributes
        }
        var incoming: [String: [Relation]] = [:]
        for entity in document.entities {
            for attribute in referenceIndex[entity.name] ?? [] {
                guard let target = attribute.references, entityIndex[target] != nil,
                    let relation = Relation(child: entity.name, reference: attribute)
                else {
                    throw .invalidSchema("\(entity.name).\(attribute.name) references unknown entity \"\(attribute.references ?? "")\"")
                }
                incoming[target, default: []].append(relation)
            }
        }
        self.document = document
        self.entityIndex = entityIndex
        self.attributeIndex = attributeIndex
        self.referenceIndex = referenceIndex
        self.incoming = incoming
    }

    public var version: Int { document.version }

    /// The same schema with every operation permitted on every entity: what a
    /// device whose app skips the local permission check works with (the
    /// server still enforces the role's permissions and rejects as `forbidden`).
    public func permittingEverything() -> LocalSchema {
        var document = self.document
        for index in document.entities.indices {
            document.entities[index].permissions = Permissions(create: true, update: true, delete: true)
        }
        // The document was valid before; only permissions changed.
        return (try? LocalSchema(document)) ?? self
    }

    /// Entities in the schema's order.
    public var entities: [EntityDescription] { document.entities }

    public func entityIfKnown(_ name: String) -> EntityDescription? {
        entityIndex[name].map { document.entities[$0] }
    }

    public func entity(_ name: String) throws(DeviceError) -> EntityDescription {
        guard let entity = entityIfKnown(name) else { throw .unknownEntity(name) }
        return entity
    }

    public func attribute(_ entity: String, _ name: String) -> AttributeDescription? {
        attributeIndex[entity]?[name]
    }

    /// The attributes of `entity` that reference other records.
    public func referenceAttributes(of entity: String) -> [AttributeDescription] {
        referenceIndex[entity] ?? []
    }

    /// Every reference, in any entity, to records of `entity`.
    public func relations(to entity: String) -> [Relation] {
        incoming[entity] ?? []
    }
}
