import Foundation
import RevsyncRules
import RevsyncWire
import Testing

@Suite struct LogEntryEncoderTests {
    let schema: DatasetSchema

    init() throws {
        schema = try Fixtures.defaultSchema()
    }

    /// The contract's example as committed, plus an update, a delete and a set-null cascade.
    private var applied: AppliedChangeSet {
        var applied = AppliedChangeSet(seq: 7, types: ["screen_instances", "screen_instance_items"])
        applied.create("screen_instances", CreatedRecord(id: 321, temporaryId: -10, values: [
            "comment": "", "date": "2014-02-01 12:15:23.487+00", "player_id": nil, "screen_id": 749,
        ]))
        applied.create("screen_instance_items", CreatedRecord(id: 412, temporaryId: -11, values: [
            "screen_instance_id": 321, "numeric_value": 2.0, "screen_item_id": nil, "text_value": nil,
        ]))
        applied.create("screen_instance_items", CreatedRecord(id: 413, temporaryId: -12, values: [
            "screen_instance_id": 321, "numeric_value": 5.5, "screen_item_id": nil, "text_value": "a \"b\"\n\u{1}",
        ]))
        applied.update("screen_instances", id: 300, values: ["comment": "edited"])
        applied.delete("screen_instance_items", id: 400)
        applied.update("notes", id: 900, values: ["player_id": nil])
        return applied
    }

    /// The entry with its revision placeholders filled in, as the database does.
    private func filled(_ bytes: [UInt8], revision: Int64) -> [UInt8] {
        bytes.flatMap { $0 == JSONWriter.placeholder ? Array(String(revision).utf8) : [$0] }
    }

    private func object(_ bytes: [UInt8]) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any])
    }

    @Test func placeholderStandsWhereEveryRevisionGoes() throws {
        let bytes = LogEntryEncoder.encode(applied, schema: schema, author: true)
        // The set's own revision and one per created or updated record.
        #expect(bytes.filter { $0 == JSONWriter.placeholder }.count == 1 + 3 + 2)

        let set = try JSONDecoder().decode(ChangeSet.self, from: Data(filled(bytes, revision: 42)))
        #expect(set.revision == 42)
        #expect(set.conflict == false)
        #expect(set.types == ["screen_instances", "screen_instance_items", "notes"])
        for entity in set.types {
            let changes = try #require(set.entities[entity])
            for id in changes.create + changes.update {
                #expect(changes.attributes[id]?[ReservedAttribute.revision] == .integer(42), "\(entity) \(id)")
            }
        }
    }

    @Test func authorFormCarriesSeqAndOldIds() throws {
        let bytes = filled(LogEntryEncoder.encode(applied, schema: schema, author: true), revision: 1001)
        let set = try JSONDecoder().decode(ChangeSet.self, from: Data(bytes))
        #expect(set.seq == 7)
        let instances = try #require(set.entities["screen_instances"])
        #expect(instances.create == [321])
        #expect(instances.update == [300])
        #expect(instances.attributes[321]?[ReservedAttribute.oldId] == .integer(-10))
        #expect(instances.attributes[300]?[ReservedAttribute.oldId] == nil)
        let items = try #require(set.entities["screen_instance_items"])
        #expect(items.create == [412, 413])
        #expect(items.delete == [400])
        #expect(items.attributes[412]?[ReservedAttribute.oldId] == .integer(-11))
        #expect(items.attributes[413]?[ReservedAttribute.oldId] == .integer(-12))
    }

    @Test func publicFormHasNoSeqAndNoOldIds() throws {
        let bytes = filled(LogEntryEncoder.encode(applied, schema: schema, author: false), revision: 1001)
        let json = try object(bytes)
        #expect(json["seq"] == nil)
        #expect(!String(decoding: bytes, as: UTF8.self).contains(ReservedAttribute.oldId))
        let set = try JSONDecoder().decode(ChangeSet.self, from: Data(bytes))
        #expect(set.entities["screen_instances"]?.create == [321])
        #expect(set.entities["screen_instances"]?.attributes[321]?["screen_id"] == .integer(749))
    }

    @Test func recordsCarryTheirValues() throws {
        let bytes = filled(LogEntryEncoder.encode(applied, schema: schema, author: false), revision: 5)
        let set = try JSONDecoder().decode(ChangeSet.self, from: Data(bytes))
        let created = try #require(set.entities["screen_instances"]?.attributes[321])
        #expect(created == [
            "revision": 5, "screen_id": 749, "player_id": nil, "date": "2014-02-01 12:15:23.487+00", "comment": "",
        ])
        let items = try #require(set.entities["screen_instance_items"])
        // An integral double reads back as an integer, as in the contract's example (`"numeric_value": 2`).
        #expect(items.attributes[412]?["numeric_value"] == .integer(2))
        #expect(items.attributes[413]?["numeric_value"] == .double(5.5))
        #expect(items.attributes[413]?["text_value"] == .string("a \"b\"\n\u{1}"))
        #expect(set.entities["screen_instances"]?.attributes[300] == ["revision": 5, "comment": "edited"])
        #expect(set.entities["notes"]?.attributes[900] == ["revision": 5, "player_id": nil])
        #expect(items.attributes[400] == nil)
    }

    @Test func attributesFollowSchemaOrder() throws {
        let text = String(decoding: LogEntryEncoder.encode(applied, schema: schema, author: true), as: UTF8.self)
        let order = try #require(schema.entity(named: "screen_instances")).attributes.map { "\"\($0.name)\":" }
        #expect(order == ["\"screen_id\":", "\"player_id\":", "\"date\":", "\"comment\":"])
        let record = try #require(text.range(of: "\"321\":{"))
        let positions = try order.map { key in
            try #require(text.range(of: key, range: record.upperBound..<text.endIndex)).lowerBound
        }
        #expect(positions == positions.sorted())
    }

    @Test func sameChangeSetAlwaysHasTheSameBytes() {
        var reordered = AppliedChangeSet(seq: 7, types: ["screen_instances"])
        reordered.create("screen_instances", CreatedRecord(id: 1, temporaryId: -1, values: [
            "screen_id": 749, "date": "2024-01-01 00:00:00+00", "comment": nil, "player_id": 3,
        ]))
        var again = AppliedChangeSet(seq: 7, types: ["screen_instances"])
        again.create("screen_instances", CreatedRecord(id: 1, temporaryId: -1, values: [
            "player_id": 3, "comment": nil, "date": "2024-01-01 00:00:00+00", "screen_id": 749,
        ]))
        #expect(LogEntryEncoder.encode(reordered, schema: schema, author: true)
            == LogEntryEncoder.encode(again, schema: schema, author: true))
    }

    @Test func stringsCannotForgeAPlaceholder() {
        var applied = AppliedChangeSet(seq: nil, types: ["notes"])
        applied.update("notes", id: 5, values: ["body": "\u{1}\u{1}\u{1}"])
        let bytes = LogEntryEncoder.encode(applied, schema: schema, author: false)
        #expect(bytes.filter { $0 == JSONWriter.placeholder }.count == 2)
    }

    @Test func emptyEntityListsAreStillWritten() throws {
        var applied = AppliedChangeSet(seq: 1, types: ["notes"])
        applied.delete("notes", id: 8)
        let json = try object(filled(LogEntryEncoder.encode(applied, schema: schema, author: true), revision: 2))
        let notes = try #require(json["notes"] as? [String: Any])
        #expect((notes["create"] as? [Any])?.isEmpty == true)
        #expect((notes["update"] as? [Any])?.isEmpty == true)
        #expect(notes["delete"] as? [Int] == [8])
        #expect((notes["attributes"] as? [String: Any])?.isEmpty == true)
    }
}
