import Foundation
import RevsyncRules
import RevsyncServer
import RevsyncTestSupport
import RevsyncWire
import Testing

@Suite struct SchemaMigrationPlannerTests {
    private func defaultSchema() throws -> DatasetSchema {
        try SchemaLoader.load(data: Data(contentsOf: URL(fileURLWithPath: defaultSchemaPath)), file: defaultSchemaPath)
    }

    private func schema(_ json: String) throws -> DatasetSchema {
        try SchemaLoader.load(data: Data(json.utf8), file: "f.json")
    }

    /// A schema document around `entities` (a JSON array body), with roles admin, member, viewer.
    private func document(version: Int = 1, entities: String) -> String {
        #"{"version": \#(version), "roles": ["admin", "member", "viewer"], "entities": [\#(entities)]}"#
    }

    /// Version 1: notes(body string required, pinned boolean nullable) and users(name).
    private func base(version: Int = 1, notes: String = "", extraEntities: String = "") throws -> DatasetSchema {
        try schema(document(version: version, entities: """
            {"name": "users", "attributes": [{"name": "name", "type": "string"}], "permissions": {"admin": "cud"}},
            {"name": "notes", "attributes": [
                {"name": "body", "type": "string"},
                {"name": "pinned", "type": "boolean", "nullable": true}\(notes)],
             "permissions": {"admin": "cud"}}\(extraEntities)
            """))
    }

    private func refusal(from old: DatasetSchema, to new: DatasetSchema) -> String? {
        do {
            let statements = try SchemaMigrationPlanner.plan(from: old, to: new)
            Issue.record("planned \(statements)")
            return nil
        } catch {
            return error.description
        }
    }

    @Test func freshDatabaseGetsEveryTableThenForeignKeysAndIndexes() throws {
        let schema = try defaultSchema()
        let statements = try SchemaMigrationPlanner.plan(from: nil, to: schema)
        let tables = schema.entities.count
        #expect(statements.prefix(tables).allSatisfy { $0.hasPrefix("CREATE TABLE ") })
        for (statement, entity) in zip(statements, schema.entities) {
            #expect(statement.hasPrefix("CREATE TABLE \"\(entity.name)\" ("))
        }

        let rest = Array(statements.dropFirst(tables))
        let references = schema.entities.flatMap { entity in
            entity.attributes.filter { $0.references != nil }.map { (entity.name, $0) }
        }
        let foreignKeys = rest.filter { $0.contains("FOREIGN KEY") }
        let indexes = rest.filter { $0.hasPrefix("CREATE INDEX") }
        #expect(foreignKeys.count == references.count)
        #expect(indexes.count == references.count)
        #expect(foreignKeys.count + indexes.count == rest.count)
        #expect(foreignKeys.allSatisfy { $0.contains("DEFERRABLE INITIALLY DEFERRED") })
        for (entity, attribute) in references {
            let target = try #require(attribute.references)
            #expect(foreignKeys.contains {
                $0.hasPrefix("ALTER TABLE \"\(entity)\" ") && $0.contains("(\"\(attribute.name)\") REFERENCES \"\(target)\" (id)")
            }, "no foreign key for \(entity).\(attribute.name)")
            #expect(indexes.contains("CREATE INDEX ON \"\(entity)\" (\"\(attribute.name)\")"))
        }
    }

    @Test func createdTableHasItsColumnsTypesAndNullability() throws {
        let statements = try SchemaMigrationPlanner.plan(from: nil, to: base())
        let notes = try #require(statements.first { $0.hasPrefix("CREATE TABLE \"notes\"") })
        #expect(notes.contains("\"body\" text NOT NULL"))
        #expect(notes.contains("\"pinned\" boolean"))
        #expect(!notes.contains("\"pinned\" boolean NOT NULL"))
        #expect(notes.contains("id bigint"))
        #expect(notes.contains("revision bigint NOT NULL"))
    }

    @Test func columnTypesMatchAttributeTypes() {
        #expect(SchemaMigrationPlanner.sqlType(.string) == "text")
        #expect(SchemaMigrationPlanner.sqlType(.integer) == "bigint")
        #expect(SchemaMigrationPlanner.sqlType(.double) == "double precision")
        #expect(SchemaMigrationPlanner.sqlType(.boolean) == "boolean")
        #expect(SchemaMigrationPlanner.sqlType(.timestamp) == "timestamptz")
    }

    @Test func sameSchemaNeedsNothing() throws {
        #expect(try SchemaMigrationPlanner.plan(from: base(), to: base()).isEmpty)
        let schema = try defaultSchema()
        #expect(try SchemaMigrationPlanner.plan(from: schema, to: defaultSchema()).isEmpty)
    }

    @Test func newNullableAttributeIsAddedAsAColumn() throws {
        let new = try base(version: 2, notes: #", {"name": "title", "type": "string", "nullable": true}"#)
        #expect(try SchemaMigrationPlanner.plan(from: base(), to: new) == [#"ALTER TABLE "notes" ADD COLUMN "title" text"#])
    }

    @Test func newNullableReferenceGetsItsForeignKeyAndIndex() throws {
        let new = try base(version: 2, notes: #", {"name": "author_id", "type": "integer", "nullable": true, "references": "users", "onDelete": "set null"}"#)
        let statements = try SchemaMigrationPlanner.plan(from: base(), to: new)
        #expect(statements.count == 3)
        #expect(statements.first == #"ALTER TABLE "notes" ADD COLUMN "author_id" bigint"#)
        #expect(statements.dropFirst().contains { $0.contains("FOREIGN KEY") && $0.contains(#"REFERENCES "users""#) })
        #expect(statements.contains(#"CREATE INDEX ON "notes" ("author_id")"#))
    }

    @Test func requiredAttributeBecomingNullableDropsNotNull() throws {
        let new = try schema(document(version: 2, entities: """
            {"name": "users", "attributes": [{"name": "name", "type": "string"}], "permissions": {"admin": "cud"}},
            {"name": "notes", "attributes": [
                {"name": "body", "type": "string", "nullable": true},
                {"name": "pinned", "type": "boolean", "nullable": true}],
             "permissions": {"admin": "cud"}}
            """))
        #expect(try SchemaMigrationPlanner.plan(from: base(), to: new) == [#"ALTER TABLE "notes" ALTER COLUMN "body" DROP NOT NULL"#])
    }

    @Test func newEntityIsCreatedWithItsForeignKeys() throws {
        let new = try base(version: 2, extraEntities: #", {"name": "tags", "attributes": [{"name": "note_id", "type": "integer", "references": "notes", "onDelete": "cascade"}]}"#)
        let statements = try SchemaMigrationPlanner.plan(from: base(), to: new)
        #expect(statements.first?.hasPrefix(#"CREATE TABLE "tags" ("#) == true)
        #expect(statements.contains { $0.hasPrefix(#"ALTER TABLE "tags" ADD FOREIGN KEY ("note_id") REFERENCES "notes" (id)"#) })
        #expect(!statements.contains { $0.contains(#"CREATE TABLE "notes""#) })
    }

    @Test func permissionAndOnDeleteChangesNeedNoStatements() throws {
        let old = try base(notes: #", {"name": "author_id", "type": "integer", "nullable": true, "references": "users", "onDelete": "set null"}"#)
        let new = try schema(document(version: 2, entities: """
            {"name": "users", "attributes": [{"name": "name", "type": "string"}], "permissions": {"admin": "cud", "member": "c"}},
            {"name": "notes", "attributes": [
                {"name": "body", "type": "string"},
                {"name": "pinned", "type": "boolean", "nullable": true},
                {"name": "author_id", "type": "integer", "nullable": true, "references": "users", "onDelete": "cascade"}],
             "permissions": {"admin": "cu"}}
            """))
        #expect(try SchemaMigrationPlanner.plan(from: old, to: new).isEmpty)
    }

    @Test func changeWithoutANewVersionIsRefused() throws {
        let new = try base(version: 1, notes: #", {"name": "title", "type": "string", "nullable": true}"#)
        let message = refusal(from: try base(), to: new)
        #expect(message?.contains("version") == true)
        #expect(message?.contains("raise") == true)
    }

    @Test func removedEntityIsRefused() throws {
        let old = try base(extraEntities: #", {"name": "tags", "attributes": []}"#)
        let message = refusal(from: old, to: try base(version: 2))
        #expect(message?.contains("\"tags\"") == true)
        #expect(message?.contains("removed") == true)
    }

    @Test func removedAttributeIsRefused() throws {
        let old = try base(notes: #", {"name": "title", "type": "string", "nullable": true}"#)
        let message = refusal(from: old, to: try base(version: 2))
        #expect(message?.contains("\"title\"") == true)
        #expect(message?.contains("removed") == true)
    }

    @Test func newRequiredAttributeIsRefused() throws {
        let new = try base(version: 2, notes: #", {"name": "title", "type": "string"}"#)
        let message = refusal(from: try base(), to: new)
        #expect(message?.contains("\"title\"") == true)
        #expect(message?.contains("must be nullable") == true)
    }

    @Test func typeChangeIsRefused() throws {
        let new = try schema(document(version: 2, entities: """
            {"name": "users", "attributes": [{"name": "name", "type": "string"}]},
            {"name": "notes", "attributes": [
                {"name": "body", "type": "string"},
                {"name": "pinned", "type": "integer", "nullable": true}]}
            """))
        let message = refusal(from: try base(), to: new)
        #expect(message?.contains("\"pinned\"") == true)
        #expect(message?.contains("add a new attribute instead") == true)
    }

    @Test func nullableAttributeBecomingRequiredIsRefused() throws {
        let new = try schema(document(version: 2, entities: """
            {"name": "users", "attributes": [{"name": "name", "type": "string"}]},
            {"name": "notes", "attributes": [
                {"name": "body", "type": "string"},
                {"name": "pinned", "type": "boolean"}]}
            """))
        let message = refusal(from: try base(), to: new)
        #expect(message?.contains("\"pinned\"") == true)
        #expect(message?.contains("required") == true)
    }

    @Test func newReferenceToANewEntityIsPlannedAfterThatEntitysTable() throws {
        // Statements run in order, so a foreign key may only name a table created before it.
        let new = try base(
            version: 2,
            notes: #", {"name": "topic_id", "type": "integer", "nullable": true, "references": "topics", "onDelete": "set null"}"#,
            extraEntities: #", {"name": "topics", "attributes": [{"name": "title", "type": "string"}]}"#)
        let statements = try SchemaMigrationPlanner.plan(from: base(), to: new)
        let created = try #require(statements.firstIndex { $0.hasPrefix(#"CREATE TABLE "topics""#) })
        let foreignKey = try #require(statements.firstIndex { $0.contains(#"REFERENCES "topics""#) })
        #expect(created < foreignKey, "\(statements)")
    }
}
