import Foundation
import RevsyncRules
import RevsyncWire
import Testing

@Suite struct CorrectiveSetTests {
    let schema: DatasetSchema

    init() throws {
        schema = try Fixtures.defaultSchema()
    }

    private let reason = ConflictReason(
        code: .staleRevision, entity: "screen_instances", id: 321,
        message: "screen_instances 321 is at revision 1005 but the change was made on revision 1001")

    /// A rejected set that updated a record the device created earlier (-10 → 321), another
    /// one it knows by its permanent id, and created -11, which does not exist on the server.
    private var corrective: CorrectiveSet {
        var corrective = CorrectiveSet(seq: 8, reason: reason)
        corrective.keep("screen_instances", StoredRecord(id: 321, revision: 1005, values: [
            "screen_id": 749, "player_id": nil, "date": "2014-02-01 12:15:23.487+00", "comment": "theirs",
        ]), temporaryId: -10)
        corrective.keep("screen_instances", StoredRecord(id: 322, revision: 990, values: [
            "screen_id": 749, "player_id": 4, "date": "2014-02-02 00:00:00+00", "comment": nil,
        ]), temporaryId: nil)
        corrective.drop("screen_instance_items", -11)
        return corrective
    }

    private func decoded(_ corrective: CorrectiveSet, schema: DatasetSchema?) throws -> ChangeSet {
        try JSONDecoder().decode(ChangeSet.self, from: Data(corrective.encoded(schema: schema)))
    }

    @Test func encodedSetIsAConflictWithSeqAndReason() throws {
        let set = try decoded(corrective, schema: schema)
        #expect(set.conflict == true)
        #expect(set.seq == 8)
        #expect(set.revision == nil)
        #expect(set.reason == reason)
    }

    @Test func keptRecordsAreCompleteUpdatesAndMissingOnesDeletes() throws {
        let set = try decoded(corrective, schema: schema)
        #expect(set.types == ["screen_instances", "screen_instance_items"])
        let instances = try #require(set.entities["screen_instances"])
        #expect(instances.create.isEmpty)
        #expect(instances.update == [321, 322])
        #expect(instances.delete.isEmpty)
        #expect(instances.attributes[321] == [
            "__oldId__": -10, "revision": 1005,
            "screen_id": 749, "player_id": nil, "date": "2014-02-01 12:15:23.487+00", "comment": "theirs",
        ])
        #expect(instances.attributes[322]?[ReservedAttribute.oldId] == nil)
        #expect(instances.attributes[322]?[ReservedAttribute.revision] == .integer(990))
        let items = try #require(set.entities["screen_instance_items"])
        #expect(items.update.isEmpty)
        #expect(items.delete == [-11])
        #expect(items.attributes.isEmpty)
    }

    @Test func recordsAreReportedOnce() throws {
        var twice = corrective
        twice.keep("screen_instances", StoredRecord(id: 321, revision: 1005, values: [:]), temporaryId: nil)
        twice.drop("screen_instance_items", -11)
        let set = try decoded(twice, schema: schema)
        #expect(set.entities["screen_instances"]?.update == [321, 322])
        #expect(set.entities["screen_instance_items"]?.delete == [-11])
    }

    @Test func reasonWithoutEntityOrIdOmitsThem() throws {
        let corrective = CorrectiveSet(seq: nil, reason: ConflictReason(code: .invalid, entity: nil, id: nil, message: "bad \"set\""))
        let bytes = corrective.encoded(schema: schema)
        let json = try #require(try JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any])
        #expect(json["seq"] == nil)
        let reason = try #require(json["reason"] as? [String: Any])
        #expect(Set(reason.keys) == ["code", "message"])
        #expect(reason["message"] as? String == "bad \"set\"")
        #expect(try decoded(corrective, schema: nil).types.isEmpty)
    }

    @Test func withoutASchemaAttributesAreWrittenInNameOrder() throws {
        let text = String(decoding: corrective.encoded(schema: nil), as: UTF8.self)
        let names = ["comment", "date", "player_id", "screen_id"]
        let positions = try names.map { try #require(text.range(of: "\"\($0)\":")).lowerBound }
        #expect(positions == positions.sorted())
        #expect(try decoded(corrective, schema: nil) == decoded(corrective, schema: schema))
    }

    @Test func correctiveSetHasNoPlaceholderByte() {
        var corrective = corrective
        corrective.reason.message = "control \u{1} in a message"
        #expect(!corrective.encoded(schema: schema).contains(JSONWriter.placeholder))
    }
}
