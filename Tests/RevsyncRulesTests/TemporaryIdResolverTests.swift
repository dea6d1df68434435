import Foundation
import RevsyncRules
import RevsyncWire
import Testing

@Suite struct TemporaryIdResolverTests {
    let schema: DatasetSchema

    init() throws {
        schema = try Fixtures.defaultSchema()
    }

    private func normalized(_ set: ChangeSet) throws -> NormalizedChangeSet {
        try ChangeSetValidator(schema: schema, role: "admin").validate(set).get()
    }

    private func resolve(_ set: ChangeSet, known: [Int64: TemporaryIdMapping]) throws -> Result<ResolvedChangeSet, ConflictReason> {
        TemporaryIdResolver.resolve(try normalized(set), schema: schema, known: known)
    }

    /// A set that uses temporary ids of an earlier request in every place they may appear.
    private var setUsingEarlierIds: ChangeSet {
        var set = ChangeSet(seq: 4)
        set.update("notes", -5, revision: 0, ["body": "edited", "author_id": -8])
        set.delete("screen_instance_items", -6, revision: 0)
        set.create("screen_instances", -20, ["screen_id": 749, "date": "2024-01-01", "player_id": -7])
        set.create("screen_instance_items", -21, ["screen_instance_id": -20, "screen_item_id": 44])
        return set
    }

    private let earlierIds: [Int64: TemporaryIdMapping] = [
        -5: TemporaryIdMapping(entity: "notes", id: 500),
        -6: TemporaryIdMapping(entity: "screen_instance_items", id: 600),
        -7: TemporaryIdMapping(entity: "players", id: 700),
        -8: TemporaryIdMapping(entity: "users", id: 800),
        -99: TemporaryIdMapping(entity: "users", id: 9900),  // known but not used here
    ]

    @Test func knownTemporaryIdsArePermanentEverywhere() throws {
        let resolved = try resolve(setUsingEarlierIds, known: earlierIds).get()
        #expect(resolved.seq == 4)
        #expect(resolved.updates.map(\.id) == [500])
        #expect(resolved.updates.first?.values["author_id"] == .integer(800))
        #expect(resolved.deletes.map(\.id) == [600])
        let instance = try #require(resolved.creates.first { $0.entity == "screen_instances" })
        #expect(instance.temporaryId == -20)
        #expect(instance.values["player_id"] == .integer(700))
        #expect(instance.values["screen_id"] == .integer(749))
    }

    @Test func referencesToRecordsCreatedInTheSameSetKeepTheirTemporaryId() throws {
        let resolved = try resolve(setUsingEarlierIds, known: earlierIds).get()
        let item = try #require(resolved.creates.first { $0.entity == "screen_instance_items" })
        #expect(item.values["screen_instance_id"] == .integer(-20))
        #expect(!resolved.referencedRecords.contains(RecordKey("screen_instances", -20)))
    }

    @Test func referencedExistingRecordsAreCollected() throws {
        let resolved = try resolve(setUsingEarlierIds, known: earlierIds).get()
        #expect(resolved.referencedRecords == [
            RecordKey("users", 800), RecordKey("players", 700), RecordKey("screens", 749), RecordKey("screen_items", 44),
        ])
    }

    @Test func temporaryIdOfRecordsTheMappingsThisSetUses() throws {
        let resolved = try resolve(setUsingEarlierIds, known: earlierIds).get()
        #expect(resolved.temporaryIdOf == [
            RecordKey("notes", 500): -5,
            RecordKey("screen_instance_items", 600): -6,
            RecordKey("players", 700): -7,
            RecordKey("users", 800): -8,
        ])
    }

    @Test func unknownTemporaryIdIsAReferenceError() throws {
        var known = earlierIds
        known[-7] = nil
        let reason = try resolve(setUsingEarlierIds, known: known).failure
        #expect(reason?.code == .reference)
        #expect(reason?.entity == "players")
        #expect(reason?.id == -7)
    }

    @Test func mappingOfAnotherEntityIsAReferenceError() throws {
        var known = earlierIds
        known[-5] = TemporaryIdMapping(entity: "players", id: 500)  // the set updates -5 as a note
        let reason = try resolve(setUsingEarlierIds, known: known).failure
        #expect(reason?.code == .reference)
        #expect(reason?.entity == "notes")
        #expect(reason?.id == -5)
    }

    @Test func createReusingAnAlreadyMappedTemporaryIdIsInvalid() throws {
        var known = earlierIds
        known[-20] = TemporaryIdMapping(entity: "screen_instances", id: 2000)
        let reason = try resolve(setUsingEarlierIds, known: known).failure
        #expect(reason?.code == .invalid)
        #expect(reason?.entity == "screen_instances")
        #expect(reason?.id == -20)
    }

    @Test func setWithoutTemporaryIdsResolvesToItself() throws {
        var set = ChangeSet()
        set.update("notes", 3, revision: 2, ["player_id": 12])
        set.delete("notes", 4, revision: 2)
        let resolved = try resolve(set, known: [:]).get()
        #expect(resolved.updates.map(\.id) == [3])
        #expect(resolved.updates.first?.values == ["player_id": .integer(12)])
        #expect(resolved.deletes.map(\.id) == [4])
        #expect(resolved.referencedRecords == [RecordKey("players", 12)])
        #expect(resolved.temporaryIdOf.isEmpty)
    }
}
