import Foundation
import RevsyncRules
import RevsyncWire
import Testing

@Suite struct DefaultSchemaTests {
    @Test func defaultSchemaLoadsWithTheCaseStudyEntities() throws {
        let schema = try Fixtures.defaultSchema()
        #expect(schema.entities.count >= 12)
        #expect(schema.roles == ["admin", "member", "viewer"])
        for name in ["users", "screens", "screen_instances", "screen_instance_items", "teams", "players"] {
            #expect(schema.entity(named: name) != nil, "missing \(name)")
        }
        #expect(schema.entity(named: "users")?.attributes.map(\.name).starts(with: ["first_name", "last_name", "date_of_birth"]) == true)
        let instance = try #require(schema.entity(named: "screen_instances"))
        #expect(instance.attribute(named: "screen_id")?.references == "screens")
        #expect(instance.attribute(named: "date")?.type == .timestamp)
        #expect(instance.attribute(named: "comment")?.nullable == true)
        #expect(schema.entity(named: "screen_instance_items")?.attribute(named: "numeric_value")?.type == .double)
    }

    @Test func memberMayCreateScreenInstancesButNotDeleteThem() throws {
        let instance = try #require(try Fixtures.defaultSchema().entity(named: "screen_instances"))
        let member = instance.permissions(for: "member")
        #expect(member.create)
        #expect(member.update)
        #expect(!member.delete)
        #expect(instance.permissions(for: "admin") == .all)
    }

    @Test func viewerAndUnknownRolesMayDoNothing() throws {
        let schema = try Fixtures.defaultSchema()
        for entity in schema.entities {
            #expect(entity.permissions(for: "viewer") == .none, "viewer may change \(entity.name)")
            #expect(entity.permissions(for: "nobody") == .none)
        }
    }

    @Test func everyReferenceOfTheDefaultSchemaPointsToAnEntityOfIt() throws {
        let schema = try Fixtures.defaultSchema()
        for entity in schema.entities {
            for attribute in entity.attributes {
                if let target = attribute.references {
                    #expect(schema.entity(named: target) != nil)
                    #expect(attribute.type == .integer)
                    #expect(attribute.onDelete != nil)
                } else {
                    #expect(attribute.onDelete == nil)
                }
            }
        }
    }

    @Test func referencesToAnEntityListEveryChildWithItsRule() throws {
        let relations = try Fixtures.defaultSchema().references(to: "players")
        #expect(Set(relations) == [
            Relation(child: "screen_instances", attribute: "player_id", rule: .setNull),
            Relation(child: "attendances", attribute: "player_id", rule: .cascade),
            Relation(child: "notes", attribute: "player_id", rule: .cascade),
        ])
    }

    @Test func documentShowsTheCallersPermissions() throws {
        let schema = try Fixtures.defaultSchema()
        let document = schema.document(for: "member")
        #expect(document.version == schema.version)
        #expect(document.entities.map(\.name) == schema.entities.map(\.name))
        let instances = try #require(document.entities.first { $0.name == "screen_instances" })
        #expect(instances.permissions == Permissions(create: true, update: true, delete: false))
    }
}

@Suite struct SchemaLoaderRefusalTests {
    /// The refusal for a schema with one entity `notes` holding `attributes` (JSON objects).
    private func refusal(attributes: String, permissions: String = #"{"admin": "cud"}"#, extraEntities: String = "") -> String {
        let entities = #"{"name": "notes", "attributes": [\#(attributes)], "permissions": \#(permissions)}"# + extraEntities
        return refusal(Fixtures.document(entities: entities))
    }

    private func refusal(_ json: String) -> String {
        do {
            let schema = try Fixtures.schema(json)
            return "loaded \(schema.entities.map(\.name))"
        } catch {
            #expect(error is SchemaError)
            return String(describing: error)
        }
    }

    @Test func wellFormedInlineSchemaLoads() throws {
        let schema = try Fixtures.deleteRulesSchema()
        #expect(schema.entities.map(\.name) == ["leagues", "teams", "users", "players", "notes"])
        #expect(schema.entity(named: "teams")?.attribute(named: "league_id")?.nullable == false)
    }

    @Test func referenceWithoutOnDeleteIsRestrict() throws {
        let schema = try Fixtures.schema(Fixtures.document(entities: """
            {"name": "owners", "attributes": [], "permissions": {}},
            {"name": "notes", "attributes": [{"name": "owner_id", "type": "integer", "references": "owners"}]}
            """))
        #expect(schema.entity(named: "notes")?.attribute(named: "owner_id")?.onDelete == .restrict)
        #expect(schema.references(to: "owners") == [Relation(child: "notes", attribute: "owner_id", rule: .restrict)])
    }

    @Test func unknownTypeIsRefused() {
        #expect(refusal(attributes: #"{"name": "body", "type": "text"}"#)
            == #"f.json: entity "notes", attribute "body": unknown type "text" (use string, integer, double, boolean, timestamp)"#)
    }

    @Test func referenceToUnknownEntityIsRefused() {
        #expect(refusal(attributes: #"{"name": "owner_id", "type": "integer", "references": "owners"}"#)
            == #"f.json: entity "notes", attribute "owner_id": references unknown entity "owners""#)
    }

    @Test func referenceOfNonIntegerTypeIsRefused() {
        #expect(refusal(attributes: #"{"name": "owner_id", "type": "string", "references": "notes"}"#)
            == #"f.json: entity "notes", attribute "owner_id": a reference must have type integer, not string"#)
    }

    @Test func setNullOnRequiredAttributeIsRefused() {
        #expect(refusal(attributes: #"{"name": "parent_id", "type": "integer", "nullable": false, "references": "notes", "onDelete": "set null"}"#)
            == #"f.json: entity "notes", attribute "parent_id": onDelete "set null" needs a nullable attribute"#)
    }

    @Test func unknownOnDeleteRuleIsRefused() {
        #expect(refusal(attributes: #"{"name": "parent_id", "type": "integer", "nullable": true, "references": "notes", "onDelete": "nullify"}"#)
            == #"f.json: entity "notes", attribute "parent_id": unknown onDelete "nullify" (use cascade, restrict or set null)"#)
    }

    @Test func onDeleteWithoutReferencesIsRefused() {
        #expect(refusal(attributes: #"{"name": "parent_id", "type": "integer", "onDelete": "cascade"}"#)
            == #"f.json: entity "notes", attribute "parent_id": onDelete is only for attributes with "references""#)
    }

    @Test(arguments: ["id", "revision", "rs_x"])
    func reservedAttributeNameIsRefused(name: String) {
        #expect(refusal(attributes: #"{"name": "\#(name)", "type": "integer"}"#)
            == #"f.json: entity "notes", attribute "\#(name)": the name is reserved (id, revision and rs_*)"#)
    }

    @Test(arguments: ["types", "seq", "revision", "resync", "revsync_x"])
    func reservedEntityNameIsRefused(name: String) {
        #expect(refusal(Fixtures.document(entities: #"{"name": "\#(name)", "attributes": []}"#))
            == #"f.json: entity "\#(name)": the name is reserved (seq, conflict, revision, reason, resync, types and revsync_*)"#)
    }

    @Test func duplicateEntityIsRefused() {
        #expect(refusal(attributes: "", extraEntities: #", {"name": "notes", "attributes": []}"#)
            == #"f.json: entity "notes": is defined twice"#)
    }

    @Test func duplicateAttributeIsRefused() {
        #expect(refusal(attributes: #"{"name": "body", "type": "string"}, {"name": "body", "type": "integer"}"#)
            == #"f.json: entity "notes", attribute "body": is defined twice"#)
    }

    @Test func unknownRoleInPermissionsIsRefused() {
        #expect(refusal(attributes: "", permissions: #"{"admin": "cud", "guest": "c"}"#)
            == #"f.json: entity "notes": permissions name unknown role "guest""#)
    }

    @Test func permissionLettersOutsideCUDAreRefused() {
        #expect(refusal(attributes: "", permissions: #"{"member": "crud"}"#)
            == #"f.json: entity "notes": permissions for "member" must be letters from "cud" (create, update, delete), not "crud""#)
    }

    @Test func emptyPermissionLettersGrantNothing() throws {
        let schema = try Fixtures.schema(Fixtures.document(entities: #"{"name": "notes", "attributes": [], "permissions": {"member": "", "admin": "dc"}}"#))
        let notes = try #require(schema.entity(named: "notes"))
        #expect(notes.permissions(for: "member") == .none)
        #expect(notes.permissions(for: "admin") == Permissions(create: true, update: false, delete: true))
    }

    @Test(arguments: ["Notes", "my-notes", "1notes", "_notes", "notes table", ""])
    func invalidEntityNameIsRefused(name: String) {
        #expect(refusal(Fixtures.document(entities: #"{"name": "\#(name)", "attributes": []}"#))
            == #"f.json: entity "\#(name)": entity names must be lowercase letters, digits and _, at most 63"#)
    }

    @Test func entityNameOfSixtyFourCharactersIsRefused() {
        let long = String(repeating: "n", count: 64)
        #expect(refusal(Fixtures.document(entities: #"{"name": "\#(long)", "attributes": []}"#))
            == #"f.json: entity "\#(long)": entity names must be lowercase letters, digits and _, at most 63"#)
        let fits = String(repeating: "n", count: 63)
        #expect(refusal(Fixtures.document(entities: #"{"name": "\#(fits)", "attributes": []}"#)) == "loaded [\"\(fits)\"]")
    }

    @Test(arguments: ["Body", "pinned-at", "body\"x"])
    func invalidAttributeNameIsRefused(name: String) {
        let escaped = name.replacingOccurrences(of: "\"", with: "\\\"")
        #expect(refusal(attributes: #"{"name": "\#(escaped)", "type": "string"}"#)
            == #"f.json: entity "notes", attribute "\#(name)": attribute names must be lowercase letters, digits and _, at most 63"#)
    }

    @Test func invalidRoleNameIsRefused() {
        #expect(refusal(#"{"version": 1, "roles": ["Admin"], "entities": [{"name": "notes", "attributes": []}]}"#)
            == #"f.json: role "Admin" must be lowercase letters, digits and _"#)
    }

    @Test func documentLevelMistakesAreRefused() {
        #expect(refusal(#"{"version": 0, "roles": ["a"], "entities": [{"name": "n", "attributes": []}]}"#)
            == #"f.json: "version" must be a positive integer"#)
        #expect(refusal(#"{"version": 1, "roles": [], "entities": [{"name": "n", "attributes": []}]}"#)
            == #"f.json: "roles" must name at least one role"#)
        #expect(refusal(#"{"version": 1, "roles": ["a", "a"], "entities": [{"name": "n", "attributes": []}]}"#)
            == #"f.json: "roles" lists a role twice"#)
        #expect(refusal(#"{"version": 1, "roles": ["a"], "entities": []}"#)
            == #"f.json: "entities" is empty"#)
    }

    @Test func notJSONIsRefusedAsInvalidDocument() {
        let message = refusal("{ this is not json")
        #expect(message.hasPrefix("f.json: is not a valid schema document: "), "\(message)")
    }

    @Test func missingKeyIsRefusedWithItsPath() {
        let message = refusal(#"{"version": 1, "roles": ["a"], "entities": [{"name": "n", "attributes": [{"name": "x"}]}]}"#)
        #expect(message.hasPrefix("f.json: is not a valid schema document: missing \"type\""), "\(message)")
        #expect(message.contains(".entities[0].attributes[0]"), "\(message)")
    }
}
