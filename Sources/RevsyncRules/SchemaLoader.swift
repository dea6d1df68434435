import Foundation
import RevsyncWire

/// A schema file that cannot be used, with where and why.
public struct SchemaError: Error, CustomStringConvertible, Sendable {
    public let file: String
    public let entity: String?
    public let attribute: String?
    public let problem: String

    public init(file: String, entity: String?, attribute: String?, problem: String) {
        self.file = file
        self.entity = entity
        self.attribute = attribute
        self.problem = problem
    }

    public var description: String {
        var place = file
        if let entity { place += ": entity \"\(entity)\"" }
        if let attribute { place += ", attribute \"\(attribute)\"" }
        return "\(place): \(problem)"
    }
}

/// Checks the schema file of `Config/` (as read by the server) before anything uses it.
///
/// Format: `{"version": 1, "roles": [...], "entities": [{"name", "attributes": [...],
/// "permissions": {"<role>": "cud"}}]}` where the letters grant create, update, delete.
public enum SchemaLoader {
    public static func load(data: Data, file: String) throws -> DatasetSchema {
        let raw: RawSchema
        do {
            raw = try JSONDecoder().decode(RawSchema.self, from: data)
        } catch let error as DecodingError {
            throw SchemaError(file: file, entity: nil, attribute: nil, problem: "is not a valid schema document: \(describe(error))")
        }
        func fail(_ entity: String?, _ attribute: String?, _ problem: String) -> SchemaError {
            SchemaError(file: file, entity: entity, attribute: attribute, problem: problem)
        }
        guard raw.version >= 1 else { throw fail(nil, nil, "\"version\" must be a positive integer") }
        guard !raw.roles.isEmpty else { throw fail(nil, nil, "\"roles\" must name at least one role") }
        for role in raw.roles where !SchemaNames.isIdentifier(role) {
            throw fail(nil, nil, "role \"\(role)\" must be lowercase letters, digits and _")
        }
        guard Set(raw.roles).count == raw.roles.count else { throw fail(nil, nil, "\"roles\" lists a role twice") }
        guard !raw.entities.isEmpty else { throw fail(nil, nil, "\"entities\" is empty") }

        let entityNames = raw.entities.map(\.name)
        var seen: Set<String> = []
        var entities: [Entity] = []
        for rawEntity in raw.entities {
            let name = rawEntity.name
            guard SchemaNames.isIdentifier(name) else { throw fail(name, nil, "entity names must be lowercase letters, digits and _, at most 63") }
            guard !SchemaNames.isReservedEntityName(name) else {
                throw fail(name, nil, "the name is reserved (seq, conflict, revision, reason, resync, types and revsync_*)")
            }
            guard seen.insert(name).inserted else { throw fail(name, nil, "is defined twice") }
            var attributes: [AttributeDescription] = []
            for rawAttribute in rawEntity.attributes {
                attributes.append(try checkAttribute(rawAttribute, in: name, entityNames: entityNames, fail: fail))
            }
            var attributeNames: Set<String> = []
            for attribute in attributes where !attributeNames.insert(attribute.name).inserted {
                throw fail(name, attribute.name, "is defined twice")
            }
            var permissions: [String: Permissions] = [:]
            for (role, letters) in rawEntity.permissions ?? [:] {
                guard raw.roles.contains(role) else { throw fail(name, nil, "permissions name unknown role \"\(role)\"") }
                guard letters.allSatisfy({ "cud".contains($0) }) else {
                    throw fail(name, nil, "permissions for \"\(role)\" must be letters from \"cud\" (create, update, delete), not \"\(letters)\"")
                }
                permissions[role] = Permissions(create: letters.contains("c"), update: letters.contains("u"), delete: letters.contains("d"))
            }
            entities.append(Entity(name: name, attributes: attributes, permissionsByRole: permissions))
        }
        return DatasetSchema(version: raw.version, roles: raw.roles, entities: entities)
    }

    private static func checkAttribute(
        _ raw: RawAttribute, in entity: String, entityNames: [String],
        fail: (String?, String?, String) -> SchemaError
    ) throws -> AttributeDescription {
        let name = raw.name
        guard SchemaNames.isIdentifier(name) else { throw fail(entity, name, "attribute names must be lowercase letters, digits and _, at most 63") }
        guard !SchemaNames.isReservedAttributeName(name) else {
            throw fail(entity, name, "the name is reserved (id, revision and rs_*)")
        }
        guard let type = AttributeType(rawValue: raw.type) else {
            throw fail(entity, name, "unknown type \"\(raw.type)\" (use \(AttributeType.allCases.map(\.rawValue).joined(separator: ", ")))")
        }
        var onDelete: OnDeleteRule? = nil
        if let target = raw.references {
            guard entityNames.contains(target) else { throw fail(entity, name, "references unknown entity \"\(target)\"") }
            guard type == .integer else { throw fail(entity, name, "a reference must have type integer, not \(type.rawValue)") }
            let ruleName = raw.onDelete ?? OnDeleteRule.restrict.rawValue
            guard let rule = OnDeleteRule(rawValue: ruleName) else {
                throw fail(entity, name, "unknown onDelete \"\(ruleName)\" (use cascade, restrict or set null)")
            }
            if rule == .setNull && !raw.nullable {
                throw fail(entity, name, "onDelete \"set null\" needs a nullable attribute")
            }
            onDelete = rule
        } else if raw.onDelete != nil {
            throw fail(entity, name, "onDelete is only for attributes with \"references\"")
        }
        return AttributeDescription(name: name, type: type, nullable: raw.nullable, references: raw.references, onDelete: onDelete)
    }

    private static func describe(_ error: DecodingError) -> String {
        switch error {
        case .keyNotFound(let key, let context):
            return "missing \"\(key.stringValue)\" at \(path(context.codingPath))"
        case .typeMismatch(_, let context), .valueNotFound(_, let context), .dataCorrupted(let context):
            return "\(context.debugDescription) at \(path(context.codingPath))"
        @unknown default:
            return String(describing: error)
        }
    }

    private static func path(_ keys: [any CodingKey]) -> String {
        keys.isEmpty ? "the top level" : keys.map { $0.intValue.map { "[\($0)]" } ?? ".\($0.stringValue)" }.joined()
    }
}

private struct RawSchema: Decodable {
    let version: Int
    let roles: [String]
    let entities: [RawEntity]
}

private struct RawEntity: Decodable {
    let name: String
    let attributes: [RawAttribute]
    let permissions: [String: String]?
}

private struct RawAttribute: Decodable {
    let name: String
    let type: String
    let nullable: Bool
    let references: String?
    let onDelete: String?

    enum CodingKeys: String, CodingKey { case name, type, nullable, references, onDelete }

    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        name = try container.decode(String.self, forKey: .name)
        type = try container.decode(String.self, forKey: .type)
        nullable = try container.decodeIfPresent(Bool.self, forKey: .nullable) ?? false
        references = try container.decodeIfPresent(String.self, forKey: .references)
        onDelete = try container.decodeIfPresent(String.self, forKey: .onDelete)
    }
}
