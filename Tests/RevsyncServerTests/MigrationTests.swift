import Foundation
import Logging
import PostgresNIO
import RevsyncHarness
import RevsyncTestSupport
import RevsyncWire
import Testing
@testable import RevsyncServer

/// The dataset schema evolves by versioned, transactional migrations.
@Suite struct MigrationTests {
    /// The default schema with `edit` applied to its JSON, written to a temporary file.
    static func schemaFile(_ edit: (inout [String: Any]) -> Void) throws -> String {
        let data = try Data(contentsOf: URL(fileURLWithPath: defaultSchemaPath))
        var json = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        edit(&json)
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("schema-\(UUID().uuidString).json").path
        try JSONSerialization.data(withJSONObject: json).write(to: URL(fileURLWithPath: path))
        return path
    }

    static func addToNotes(_ attribute: [String: Any], version: Int) -> (inout [String: Any]) -> Void {
        { json in
            json["version"] = version
            var entities = json["entities"] as? [[String: Any]] ?? []
            if let index = entities.firstIndex(where: { $0["name"] as? String == "notes" }) {
                var attributes = entities[index]["attributes"] as? [[String: Any]] ?? []
                attributes.append(attribute)
                entities[index]["attributes"] = attributes
            }
            json["entities"] = entities
        }
    }

    static func migrate(_ url: String, schema path: String) async throws -> [String] {
        var settings = ServerSettings()
        settings.databaseURL = url
        settings.schemaPath = path
        settings.databaseTimeout = .seconds(30)
        let server = try Server(settings: settings, logger: Logger(label: "revsync.tests.migrate"))
        return try await withRunning(server.postgresService) { try await server.migrator.migrate() }
    }

    @Test func newNullableAttributeAndEntityAreAddedAndRefusalsExplainThemselves() async throws {
        try await TestDatabase.withNew { url in
            let first = try await Self.migrate(url, schema: defaultSchemaPath)
            #expect(first.contains { $0.hasPrefix("core 1:") } && first.last == "dataset schema version 1: 49 statements")
            #expect(try await Self.migrate(url, schema: defaultSchemaPath).isEmpty)

            let v2 = try Self.schemaFile(Self.addToNotes(["name": "color", "type": "string", "nullable": true], version: 2))
            let steps = try await Self.migrate(url, schema: v2)
            #expect(steps == ["dataset schema version 2: 1 statements"])

            let color: [String: Any] = ["name": "color", "type": "string", "nullable": true]
            let withColor = Self.addToNotes(color, version: 2)
            let sameVersion = try Self.schemaFile { json in
                withColor(&json)
                Self.addToNotes(["name": "shade", "type": "string", "nullable": true], version: 2)(&json)
            }
            await #expect { try await Self.migrate(url, schema: sameVersion) } throws: { "\($0)".contains("raise \"version\"") }
            let required = try Self.schemaFile { json in
                withColor(&json)
                Self.addToNotes(["name": "weight", "type": "double", "nullable": false], version: 3)(&json)
            }
            await #expect { try await Self.migrate(url, schema: required) } throws: { "\($0)".contains("must be nullable") }
        }
    }

    /// A rolling schema upgrade: an upgraded instance migrated the database to version 2 while
    /// this one still runs version 1. A change set naming the new attribute is answered `503`, to
    /// be sent again (to an upgraded instance), not rejected `invalid` and undone on the device;
    /// change sets naming only what version 1 knows are applied as ever, and a name no version
    /// knows is still `invalid`.
    @Test func anInstanceBehindTheDatabasesSchemaAsksForNewNamesAgain() async throws {
        try await TestDatabase.withNew(migrated: true) { url in
            let v2 = try Self.schemaFile(Self.addToNotes(["name": "color", "type": "string", "nullable": true], version: 2))
            #expect(try await Self.migrate(url, schema: v2) == ["dataset schema version 2: 1 statements"])
            var settings = ServerSettings.forTests(databaseURL: url)
            settings.adminToken = adminToken
            let server = try Server(settings: settings, logger: Logger(label: "revsync.tests.behind"))
            #expect(server.settings.schemaPath == defaultSchemaPath)
            try await server.buildApplication(migrate: false).test(.router) { client in
                let harness = TestHarness(client: client, server: server)
                let device = try await harness.register("admin", name: "admin")
                func note(_ seq: Int64, _ attributes: Attributes) -> ChangeSet {
                    changeSet(seq: seq, ("notes", EntityChanges(create: [-seq], attributes: [-seq: attributes])))
                }
                let (status, body) = try await harness.post(device, SyncRequest(maxRevision: 0, changeSets: [
                    note(1, ["body": "plain", "pinned": false]), note(2, ["body": "colored", "pinned": false, "color": "red"]),
                ]))
                #expect(status == .serviceUnavailable)
                let error = try harness.error(body)
                #expect(error.error == "unavailable" && error.message.contains("\"notes.color\""), "\(error.message)")
                #expect(try await harness.count("notes") == 0, "nothing of the request applied")

                let plain = try await harness.sync(device, from: 0, [note(1, ["body": "plain", "pinned": false])])
                #expect(plain.changeSets.first?.revision == 1)
                let unknown = try await harness.sync(device, from: 1, [note(2, ["body": "odd", "pinned": false, "smell": "musty"])])
                #expect(unknown.changeSets.first?.reason?.code == .invalid)
            }
        }
    }

    @Test func badSchemaFileIsRefusedNamingFileEntityAndAttribute() throws {
        let path = try Self.schemaFile(Self.addToNotes(["name": "owner_id", "type": "integer", "nullable": true, "references": "owners"], version: 2))
        var settings = ServerSettings()
        settings.schemaPath = path
        #expect { try Server(settings: settings, logger: Logger(label: "x")) } throws: { error in
            "\(error)" == "\(path): entity \"notes\", attribute \"owner_id\": references unknown entity \"owners\""
        }
    }
}
