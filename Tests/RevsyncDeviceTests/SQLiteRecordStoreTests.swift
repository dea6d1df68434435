import Foundation
import RevsyncWire
import Testing

@testable import RevsyncDevice

@Suite("SQLite store")
struct SQLiteRecordStoreTests {
    /// An in-memory SQLite database with the test schema's tables.
    func makeDatabase() throws -> (DeviceDatabase, SQLiteLayout) {
        let database = try DeviceDatabase.open(path: nil)
        let layout = SQLiteLayout(schema: TestSchema.schema)
        try database.writer.write { (db) throws in try DeviceDatabase.ensureTables(for: TestSchema.schema, in: db) }
        return (database, layout)
    }

    @Test func recordsRoundTripWithTheirTypes() throws {
        let (database, layout) = try makeDatabase()
        let player = DeviceRecord(id: -3, revision: 0, attributes: ["team_id": 10, "user_id": .null, "number": 7, "rating": 6.5, "active": true])
        let user = DeviceRecord(id: 4, revision: 9, attributes: ["first_name": "Zoë \"Z\"", "date_of_birth": "2001-02-03 02:05:06.5+00"])
        try database.writer.write { (db) throws in
            let store = SQLiteRecordStore(db, layout: layout)
            try store.put("players", player)
            try store.put("users", user)
            try store.put("players", DeviceRecord(id: 5, revision: 1, attributes: ["team_id": 10, "rating": 2]))
        }
        try database.writer.read { (db) throws in
            let store = SQLiteRecordStore(db, layout: layout)
            #expect(try store.record("players", id: -3) == player)
            #expect(try store.record("users", id: 4) == user)
            #expect(try store.record("players", id: 5)?.attributes == ["team_id": 10, "user_id": .null, "number": .null, "rating": 2.0, "active": .null])
            #expect(try store.ids("players", where: "team_id", equals: 10) == [-3, 5])
            #expect(try store.record("players", id: 99) == nil)
        }
    }

    @Test func queriesRunAsSQL() throws {
        let (database, layout) = try makeDatabase()
        try database.writer.write { (db) throws in
            let store = SQLiteRecordStore(db, layout: layout)
            for (id, number, active) in [(1, 3, true), (2, 1, false), (3, 2, true)] as [(Int64, Int64, Bool)] {
                try store.put("players", DeviceRecord(id: id, revision: id, attributes: ["team_id": 10, "number": .integer(number), "active": .bool(active)]))
            }
            try store.put("players", DeviceRecord(id: 4, revision: 4, attributes: ["team_id": 11]))
        }
        try database.writer.read { (db) throws in
            let store = SQLiteRecordStore(db, layout: layout)
            func ids(_ query: RecordQuery) throws -> [Int64] { try store.records("players", matching: query).map(\.id) }
            #expect(try ids(.all) == [1, 2, 3, 4])
            #expect(try ids(RecordQuery().where("active", .equal, true).sorted(by: "number")) == [3, 1])
            #expect(try ids(RecordQuery().where("number", .equal, .null)) == [4])
            #expect(try ids(RecordQuery().where("number", .notEqual, .null).sorted(by: "number", ascending: false).limited(to: 2)) == [1, 3])
            #expect(try ids(RecordQuery().where("revision", .greater, 2)) == [3, 4])
            #expect(throws: DeviceError.unknownAttribute(entity: "players", attribute: "nope")) {
                try store.records("players", matching: RecordQuery().where("nope", .equal, 1))
            }
        }
    }

    @Test func theBookkeepingPersists() throws {
        let (database, layout) = try makeDatabase()
        var changeSet = ChangeSet(seq: 7)
        changeSet.create("teams", -1, ["league_id": 1, "name": "Hawks"])
        try database.writer.write { (db) throws in
            let store = SQLiteRecordStore(db, layout: layout)
            try store.setMeta(DeviceMeta(maxRevision: 12, nextSeq: 8, nextTemporaryId: -2, bootstrapped: true, history: "h-1"))
            try store.appendToOutbox(changeSet)
            try store.setTemporaryIdMapping(-9, to: TemporaryIdMapping(entity: "teams", id: 90))
        }
        try database.writer.read { (db) throws in
            let store = SQLiteRecordStore(db, layout: layout)
            #expect(try store.meta() == DeviceMeta(maxRevision: 12, nextSeq: 8, nextTemporaryId: -2, bootstrapped: true, history: "h-1"))
            #expect(try store.outbox() == [changeSet])
            #expect(try store.temporaryIdMapping(-9) == TemporaryIdMapping(entity: "teams", id: 90))
            #expect(try store.temporaryIdMapping(-8) == nil)
        }
    }

    @Test func theRulesGiveTheSameResultOnSQLiteAsInMemory() throws {
        let (database, layout) = try makeDatabase()
        let memory = try seededStore()
        try database.writer.write { (db) throws in
            let store = SQLiteRecordStore(db, layout: layout)
            try store.setMeta(try memory.meta())
            for (entity, records) in memory.tables { for record in records.values { try store.put(entity, record) } }
        }
        let response = SyncResponse(maxRevision: 5, changeSets: [
            ChangeSet.committed(4) { cs in cs.create("players", 70, ["revision": 4, "team_id": 10, "number": 2]) },
            ChangeSet.committed(5, seq: 1) { cs in
                cs.create("players", 71, [ReservedAttribute.oldId: -1, "revision": 5, "team_id": 10, "number": 9])
                cs.update("teams", 10, ["revision": 5, "city": "York"])
            },
        ])
        func run(_ store: any RecordStore) throws -> SyncOutcome {
            _ = try LocalEdit.perform(on: store, schema: TestSchema.schema) { tx in
                try tx.create("players", ["team_id": 10, "number": 9])
                try tx.update("teams", id: 10, ["city": "York"])
            }
            _ = try LocalEdit.perform(on: store, schema: TestSchema.schema) { tx in try tx.update("players", id: -1, ["rating": 1.5]) }
            return try ResponseApplier(schema: TestSchema.schema).apply(response, to: store, sent: [1])
        }
        let expected = try run(memory)
        let actual = try database.writer.write { (db) throws in try run(SQLiteRecordStore(db, layout: layout)) }
        #expect(actual == expected)
        try database.writer.read { (db) throws in
            let store = SQLiteRecordStore(db, layout: layout)
            for entity in TestSchema.schema.entities.map(\.name) {
                #expect(try store.records(entity, matching: .all) == (memory.tables[entity] ?? [:]).values.sorted { $0.id < $1.id })
            }
            #expect(try store.outbox() == (try memory.outbox()))
            #expect(try store.meta() == (try memory.meta()))
        }
    }

    @Test func aNewSchemaVersionAddsTablesAndColumns() throws {
        let (database, _) = try makeDatabase()
        var document = TestSchema.document()
        document.version = 2
        document.entities[0].attributes.append(AttributeDescription(name: "founded", type: .timestamp, nullable: true))
        document.entities.append(EntityDescription(name: "coaches", attributes: [
            AttributeDescription(name: "team_id", type: .integer, nullable: true, references: "teams", onDelete: .setNull),
        ], permissions: .all))
        let schema = try LocalSchema(document)
        try database.writer.write { (db) throws in try DeviceDatabase.ensureTables(for: schema, in: db) }
        let layout = SQLiteLayout(schema: schema)
        try database.writer.write { (db) throws in
            let store = SQLiteRecordStore(db, layout: layout)
            try store.put("leagues", DeviceRecord(id: 1, revision: 1, attributes: ["name": "P", "country": .null, "founded": "1990-01-01 00:00:00+00"]))
            try store.put("coaches", DeviceRecord(id: 2, revision: 1, attributes: ["team_id": 1]))
            #expect(try store.record("leagues", id: 1)?["founded"] == "1990-01-01 00:00:00+00")
            #expect(try store.ids("coaches", where: "team_id", equals: 1) == [2])
        }
    }

    /// The device checks a served schema by the server's name rule: `_x` is refused on both sides.
    @Test func aSchemaWithANameTheServerRefusesIsRefused() {
        var leadingUnderscore = TestSchema.document()
        leadingUnderscore.entities[0].attributes.append(AttributeDescription(name: "_x", type: .string, nullable: true))
        var reservedEntity = TestSchema.document()
        reservedEntity.entities.append(EntityDescription(name: "types", attributes: [], permissions: .all))
        var sqliteEntity = TestSchema.document()
        sqliteEntity.entities.append(EntityDescription(name: "sqlite_x", attributes: [], permissions: .all))
        for document in [leadingUnderscore, reservedEntity, sqliteEntity] {
            #expect(throws: DeviceError.self) { try LocalSchema(document) }
        }
    }
}
