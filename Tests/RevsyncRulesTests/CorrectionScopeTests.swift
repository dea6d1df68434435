import RevsyncRules
import RevsyncWire
import Testing

@Suite struct CorrectionScopeTests {
    let schema: DatasetSchema

    init() throws {
        schema = try Fixtures.defaultSchema()
    }

    @Test func scopeCoversTouchedRecordsTheirParentsAndCreatedIds() {
        var set = ChangeSet(seq: 3)
        set.create("screen_instances", -10, ["screen_id": 749, "player_id": -3, "date": "2024-01-01"])
        set.update("screen_instances", 55, revision: 4, ["screen_id": 750])
        set.create("screen_instance_items", -11, ["screen_instance_id": -10, "screen_item_id": 44])
        set.delete("screen_instance_items", 70, revision: 9)
        set.update("notes", -5, revision: 0, ["body": "x", "author_id": nil])

        let scope = CorrectionScope(of: set, schema: schema)
        #expect(Set(scope.records) == [
            RecordKey("screen_instances", 55),  // updated
            RecordKey("screen_instance_items", 70),  // deleted
            RecordKey("notes", -5),  // updated by temporary id
            RecordKey("screens", 749), RecordKey("screens", 750),  // referenced parents
            RecordKey("players", -3),  // parent known by an earlier temporary id
            RecordKey("screen_items", 44),
        ])
        #expect(scope.records.count == Set(scope.records).count)
        // The reference to -10, created by this same set, is covered by `created` instead.
        #expect(!scope.records.contains(RecordKey("screen_instances", -10)))
        #expect(scope.created == [RecordKey("screen_instances", -10), RecordKey("screen_instance_items", -11)])
        #expect(scope.deletedRoots == [RecordKey("screen_instance_items", 70)])
    }

    @Test func recordTouchedSeveralTimesIsListedOnce() {
        var set = ChangeSet()
        set.update("notes", 5, revision: 1, ["author_id": 9])
        set.update("players", 9, revision: 1, ["number": 3])
        set.create("notes", -1, ["body": "b", "pinned": true, "author_id": 9])
        let scope = CorrectionScope(of: set, schema: schema)
        #expect(scope.records.filter { $0 == RecordKey("users", 9) }.count == 1)
        #expect(Set(scope.records) == [RecordKey("notes", 5), RecordKey("players", 9), RecordKey("users", 9)])
    }

    @Test func idZeroAndUnknownEntitiesAreIgnored() {
        var set = ChangeSet()
        set.update("widgets", 1, revision: 1)
        set.update("notes", 0, revision: 1, ["player_id": 0])
        let scope = CorrectionScope(of: set, schema: schema)
        #expect(scope.records.isEmpty)
        #expect(scope.created.isEmpty)
        #expect(scope.deletedRoots.isEmpty)
    }
}
