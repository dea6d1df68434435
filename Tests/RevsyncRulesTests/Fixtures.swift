import Foundation
import RevsyncRules
import RevsyncWire
import Testing

/// Schemas and change sets shared by the rules tests.
enum Fixtures {
    /// `Config/schema.json` of this repository: …/Tests/RevsyncRulesTests/Fixtures.swift → repo root.
    static let defaultSchemaURL = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent()
        .deletingLastPathComponent()
        .deletingLastPathComponent()
        .appendingPathComponent("Config/schema.json")

    static func defaultSchema() throws -> DatasetSchema {
        try SchemaLoader.load(data: Data(contentsOf: defaultSchemaURL), file: defaultSchemaURL.path)
    }

    /// A schema from inline JSON, reported as file `f.json`.
    static func schema(_ json: String) throws -> DatasetSchema {
        try SchemaLoader.load(data: Data(json.utf8), file: "f.json")
    }

    /// A one-version schema document around `entities` (a JSON array body), with roles admin, member, viewer.
    static func document(version: Int = 1, entities: String) -> String {
        #"{"version": \#(version), "roles": ["admin", "member", "viewer"], "entities": [\#(entities)]}"#
    }

    /// A small schema with every on-delete rule and a role that may not delete players:
    /// teams → leagues (restrict), players → teams (cascade), players → users (set null),
    /// notes → players (cascade), notes → users (set null).
    static func deleteRulesSchema() throws -> DatasetSchema {
        try schema(document(entities: """
            {"name": "leagues", "attributes": [{"name": "name", "type": "string"}],
             "permissions": {"admin": "cud", "member": "cud"}},
            {"name": "teams", "attributes": [
                {"name": "league_id", "type": "integer", "references": "leagues", "onDelete": "restrict"},
                {"name": "name", "type": "string"}],
             "permissions": {"admin": "cud", "member": "cud"}},
            {"name": "users", "attributes": [{"name": "name", "type": "string"}],
             "permissions": {"admin": "cud", "member": "cud"}},
            {"name": "players", "attributes": [
                {"name": "team_id", "type": "integer", "references": "teams", "onDelete": "cascade"},
                {"name": "user_id", "type": "integer", "nullable": true, "references": "users", "onDelete": "set null"}],
             "permissions": {"admin": "cud", "member": "cu"}},
            {"name": "notes", "attributes": [
                {"name": "player_id", "type": "integer", "references": "players", "onDelete": "cascade"},
                {"name": "author_id", "type": "integer", "nullable": true, "references": "users", "onDelete": "set null"},
                {"name": "body", "type": "string"}],
             "permissions": {"admin": "cud", "member": "cud"}}
            """))
    }
}

extension ChangeSet {
    mutating func create(_ entity: String, _ id: Int64, _ values: Attributes) {
        self[entity].create.append(id)
        self[entity].attributes[id] = values
    }

    mutating func update(_ entity: String, _ id: Int64, revision: Int64, _ values: Attributes = [:]) {
        self[entity].update.append(id)
        self[entity].attributes[id] = values.merging([ReservedAttribute.revision: .integer(revision)]) { _, new in new }
    }

    mutating func delete(_ entity: String, _ id: Int64, revision: Int64) {
        self[entity].delete.append(id)
        self[entity].attributes[id] = [ReservedAttribute.revision: .integer(revision)]
    }
}

extension Result {
    /// The failure, or nil on success.
    var failure: Failure? {
        if case .failure(let error) = self { return error }
        return nil
    }

    var success: Success? {
        if case .success(let value) = self { return value }
        return nil
    }
}
