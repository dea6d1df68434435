import Foundation
import RevsyncRules
import RevsyncWire
import Testing

@Suite struct ChangeSetValidatorTests {
    let schema: DatasetSchema

    init() throws {
        schema = try Fixtures.defaultSchema()
    }

    private func validate(_ set: ChangeSet, as role: String = "member") -> Result<NormalizedChangeSet, ConflictReason> {
        ChangeSetValidator(schema: schema, role: role).validate(set)
    }

    /// The reason `set` is rejected with; records an issue when it is accepted.
    private func rejection(_ set: ChangeSet, as role: String = "member", sourceLocation: SourceLocation = #_sourceLocation) -> ConflictReason? {
        let result = validate(set, as: role)
        if let accepted = result.success {
            Issue.record("accepted: \(accepted)", sourceLocation: sourceLocation)
        }
        return result.failure
    }

    /// A note with every required attribute.
    private let note: Attributes = ["body": "hello", "pinned": false]

    /// The contract's request example.
    private var caseStudySet: ChangeSet {
        var set = ChangeSet(seq: 7)
        set.create("screen_instances", -10, ["screen_id": 749, "date": "2014-02-01 13:15:23.487+01", "comment": ""])
        set.create("screen_instance_items", -11, ["screen_instance_id": -10, "numeric_value": 2])
        set.create("screen_instance_items", -12, ["screen_instance_id": -10, "numeric_value": 5])
        return set
    }

    // MARK: valid change sets

    @Test func validCreateFillsOmittedNullablesAndCanonicalizesValues() throws {
        let normalized = try validate(caseStudySet).get()
        #expect(normalized.seq == 7)
        #expect(normalized.types == ["screen_instances", "screen_instance_items"])
        #expect(normalized.creates.map(\.temporaryId) == [-10, -11, -12])
        #expect(normalized.creates[0].entity == "screen_instances")
        #expect(normalized.creates[0].values == [
            "screen_id": .integer(749),
            "player_id": .null,
            "date": .string("2014-02-01 12:15:23.487+00"),
            "comment": .string(""),
        ])
        #expect(normalized.creates[1].values == [
            "screen_instance_id": .integer(-10),
            "screen_item_id": .null,
            "numeric_value": .double(2),
            "text_value": .null,
        ])
        #expect(normalized.createdHere == [-10: "screen_instances", -11: "screen_instance_items", -12: "screen_instance_items"])
        #expect(normalized.temporaryIdsToResolve.isEmpty)
        #expect(normalized.updates.isEmpty && normalized.deletes.isEmpty)
    }

    @Test func updateKeepsOnlyTheGivenAttributesAndItsBasis() throws {
        var set = ChangeSet()
        set.update("screen_instances", 55, revision: 12, ["comment": "late", "date": "2024-05-01T08:00:00-02:00"])
        let normalized = try validate(set).get()
        let update = try #require(normalized.updates.first)
        #expect(update.entity == "screen_instances")
        #expect(update.id == 55)
        #expect(update.basis == 12)
        #expect(update.values == ["comment": "late", "date": "2024-05-01 10:00:00+00"])
        #expect(normalized.creates.isEmpty)
    }

    @Test func deleteCarriesItsBasis() throws {
        var set = ChangeSet()
        set.delete("screen_instances", 55, revision: 3)
        let normalized = try validate(set, as: "admin").get()
        let delete = try #require(normalized.deletes.first)
        #expect(delete.entity == "screen_instances")
        #expect(delete.id == 55)
        #expect(delete.basis == 3)
    }

    @Test func nullForNullableAttributeIsAccepted() throws {
        var set = ChangeSet()
        set.update("screen_instances", 55, revision: 1, ["comment": nil, "player_id": nil])
        #expect(try validate(set).get().updates.first?.values == ["comment": .null, "player_id": .null])
    }

    @Test func bookkeepingKeysAreNotAttributes() throws {
        var set = ChangeSet()
        set.create("notes", -1, note.merging(["revision": 0, "__oldId__": -1]) { $1 })
        let values = try #require(try validate(set).get().creates.first?.values)
        #expect(values["revision"] == nil)
        #expect(values["__oldId__"] == nil)
    }

    // MARK: schema violations

    @Test func unknownEntityIsInvalid() {
        var set = ChangeSet()
        set.create("widgets", -1, ["name": "w"])
        let reason = rejection(set, as: "admin")
        #expect(reason?.code == .invalid)
        #expect(reason?.entity == "widgets")
    }

    @Test func unknownAttributeIsInvalid() {
        var set = ChangeSet()
        set.create("notes", -1, note.merging(["colour": "red"]) { $1 })
        let reason = rejection(set)
        #expect(reason?.code == .invalid)
        #expect(reason?.entity == "notes")
        #expect(reason?.id == -1)
        #expect(reason?.message.contains("colour") == true)
    }

    @Test(arguments: [
        ("notes", "body", JSONValue.integer(5)),
        ("notes", "body", .bool(true)),
        ("notes", "body", .unsupported),
        ("notes", "pinned", .string("yes")),
        ("notes", "pinned", .integer(1)),
        ("notes", "author_id", .double(1.5)),
        ("notes", "author_id", .string("12")),
        ("screen_instance_items", "numeric_value", .string("2")),
        ("screen_instance_items", "numeric_value", .bool(false)),
        ("screen_instances", "date", .integer(20_140_201)),
        ("screen_instances", "date", .string("2023-02-29")),
        ("screen_instances", "date", .string("yesterday")),
    ])
    func wrongTypeIsInvalid(entity: String, attribute: String, value: JSONValue) {
        var set = ChangeSet()
        set.update(entity, 8, revision: 1, [attribute: value])
        let reason = rejection(set)
        #expect(reason?.code == .invalid)
        #expect(reason?.entity == entity)
        #expect(reason?.id == 8)
        #expect(reason?.message.contains(attribute) == true)
    }

    @Test func nullForRequiredAttributeIsInvalid() {
        var set = ChangeSet()
        set.update("notes", 3, revision: 2, ["body": nil])
        let reason = rejection(set)
        #expect(reason?.code == .invalid)
        #expect(reason?.id == 3)
        #expect(reason?.message.contains("body") == true)
    }

    @Test func missingRequiredAttributeInCreateIsInvalid() {
        var set = ChangeSet()
        set.create("notes", -1, ["body": "no pinned flag"])
        let reason = rejection(set)
        #expect(reason?.code == .invalid)
        #expect(reason?.id == -1)
        #expect(reason?.message.contains("pinned") == true)
    }

    @Test func updateNeedNotRepeatRequiredAttributes() throws {
        var set = ChangeSet()
        set.update("notes", 3, revision: 2, ["pinned": true])
        #expect(try validate(set).get().updates.first?.values == ["pinned": true])
    }

    @Test(arguments: [Int64(5), 0])
    func nonNegativeIdInCreateIsInvalid(id: Int64) {
        var set = ChangeSet()
        set.create("notes", id, note)
        let reason = rejection(set)
        #expect(reason?.code == .invalid)
        #expect(reason?.entity == "notes")
        #expect(reason?.id == id)
    }

    @Test func updateWithoutRevisionIsInvalid() {
        var set = ChangeSet()
        set["notes"].update = [3]
        set["notes"].attributes[3] = ["body": "no revision"]
        let reason = rejection(set)
        #expect(reason?.code == .invalid)
        #expect(reason?.id == 3)
        #expect(reason?.message.contains("\"revision\"") == true)
    }

    @Test func deleteWithoutRevisionIsInvalid() {
        var set = ChangeSet()
        set["notes"].delete = [3]
        let reason = rejection(set)
        #expect(reason?.code == .invalid)
        #expect(reason?.id == 3)
    }

    @Test(arguments: [JSONValue.integer(-1), .string("3"), .double(3), .null])
    func revisionThatIsNotANonNegativeIntegerIsInvalid(revision: JSONValue) {
        var set = ChangeSet()
        set["notes"].update = [3]
        set["notes"].attributes[3] = ["revision": revision]
        #expect(rejection(set)?.code == .invalid)
    }

    @Test func referenceToIdZeroIsInvalid() {
        var set = ChangeSet()
        set.create("notes", -1, note.merging(["player_id": 0]) { $1 })
        #expect(rejection(set)?.code == .invalid)
    }

    @Test func attributesForAnUnlistedIdAreInvalid() {
        var set = ChangeSet()
        set.update("notes", 3, revision: 1, ["body": "x"])
        set["notes"].attributes[4] = ["revision": 1, "body": "stray"]
        let reason = rejection(set)
        #expect(reason?.code == .invalid)
        #expect(reason?.id == 4)
    }

    @Test func sameIdInUpdateAndDeleteIsInvalid() {
        var set = ChangeSet()
        set.update("notes", 3, revision: 1, ["body": "x"])
        set["notes"].delete.append(3)
        #expect(rejection(set)?.code == .invalid)
    }

    // MARK: permissions

    @Test func memberMayNotDeleteScreenInstances() {
        var set = ChangeSet()
        set.delete("screen_instances", 55, revision: 3)
        let reason = rejection(set, as: "member")
        #expect(reason?.code == .forbidden)
        #expect(reason?.entity == "screen_instances")
        #expect(reason?.id == 55)
    }

    @Test func adminMayDeleteScreenInstances() {
        var set = ChangeSet()
        set.delete("screen_instances", 55, revision: 3)
        #expect(validate(set, as: "admin").success != nil)
    }

    @Test func viewerMayNotCreateNotes() {
        var set = ChangeSet()
        set.create("notes", -1, note)
        let reason = rejection(set, as: "viewer")
        #expect(reason?.code == .forbidden)
        #expect(reason?.entity == "notes")
        #expect(reason?.id == -1)
    }

    @Test func memberMayUpdateButNotCreateTeams() {
        var create = ChangeSet()
        create.create("teams", -1, ["league_id": 1, "name": "New"])
        #expect(rejection(create)?.code == .forbidden)

        var update = ChangeSet()
        update.update("teams", 4, revision: 9, ["city": "Bern"])
        #expect(validate(update).success != nil)
    }

    @Test func memberMayNotUpdateLeagues() {
        var set = ChangeSet()
        set.update("leagues", 1, revision: 1, ["country": "CH"])
        let reason = rejection(set)
        #expect(reason?.code == .forbidden)
        #expect(reason?.id == 1)
    }

    @Test func roleTheSchemaDoesNotKnowMayDoNothing() {
        var set = ChangeSet()
        set.update("notes", 3, revision: 1, ["body": "x"])
        #expect(rejection(set, as: "intruder")?.code == .forbidden)
    }

    @Test func forbiddenOperationInOneEntityRejectsTheWholeSet() {
        var set = caseStudySet
        set.delete("screen_instances", 55, revision: 3)
        #expect(rejection(set)?.code == .forbidden)
    }

    // MARK: temporary ids

    @Test func temporaryIdCreatedTwiceIsInvalid() {
        var set = ChangeSet()
        set.create("notes", -1, note)
        set.create("users", -1, ["first_name": "A", "last_name": "B"])
        let reason = rejection(set)
        #expect(reason?.code == .invalid)
        #expect(reason?.id == -1)
    }

    @Test func temporaryIdCreatedTwiceInOneEntityIsInvalid() {
        var set = ChangeSet()
        set.create("notes", -1, note)
        set["notes"].create.append(-1)
        #expect(rejection(set)?.code == .invalid)
    }

    @Test func referenceToANewRecordOfAnotherEntityIsAReferenceError() {
        var set = ChangeSet()
        set.create("users", -1, ["first_name": "A", "last_name": "B"])
        set.create("notes", -2, note.merging(["player_id": -1]) { $1 })  // -1 is a user, not a player
        let reason = rejection(set)
        #expect(reason?.code == .reference)
        #expect(reason?.entity == "notes")
        #expect(reason?.id == -2)
    }

    @Test func referenceToANewRecordOfTheRightEntityNeedsNoResolving() throws {
        var set = ChangeSet()
        // The child comes first in `types`: order within a set does not matter.
        set.create("notes", -2, note.merging(["author_id": -1]) { $1 })
        set.create("users", -1, ["first_name": "A", "last_name": "B"])
        let normalized = try validate(set).get()
        #expect(normalized.temporaryIdsToResolve.isEmpty)
        #expect(normalized.createdHere == [-1: "users", -2: "notes"])
    }

    @Test func temporaryIdsUsedButNotCreatedAreCollectedWithTheirEntity() throws {
        var set = ChangeSet()
        set.update("notes", -5, revision: 0, ["body": "edited before acknowledgement"])
        set.delete("screen_instance_items", -6, revision: 0)
        set.create("notes", -1, note.merging(["player_id": -7, "author_id": -8]) { $1 })
        set.create("screen_instance_items", -2, ["screen_instance_id": -9, "screen_item_id": 44])
        set.create("screen_instances", -3, ["screen_id": 749, "date": "2024-01-01"])
        set.update("screen_instance_items", 70, revision: 4, ["screen_instance_id": -3])
        let normalized = try validate(set).get()
        #expect(normalized.temporaryIdsToResolve == [
            -5: "notes", -6: "screen_instance_items", -7: "players", -8: "users", -9: "screen_instances",
        ])
        #expect(normalized.createdHere == [-1: "notes", -2: "screen_instance_items", -3: "screen_instances"])
    }

    @Test func temporaryIdCreatedAndUpdatedInOneSetIsInvalid() {
        var set = ChangeSet()
        set.create("notes", -1, note)
        set.update("notes", -1, revision: 0, ["body": "again"])
        #expect(rejection(set)?.code == .invalid)
    }

    @Test func temporaryIdUsedAsTwoEntitiesIsAReferenceError() {
        var set = ChangeSet()
        set.update("notes", -5, revision: 0, ["body": "x"])
        set.create("screen_instances", -1, ["screen_id": 749, "date": "2024-01-01", "player_id": -5])
        #expect(rejection(set)?.code == .reference)
    }
}

@Suite struct StringContentTests {
    @Test func stringWithANulCharacterIsInvalidWithAMessageSayingWhy() throws {
        let schema = try Fixtures.defaultSchema()
        var set = ChangeSet(seq: 1)
        set["notes"] = EntityChanges(create: [-1], attributes: [-1: ["body": "a\u{0}b", "pinned": false]])
        guard case .failure(let reason) = ChangeSetValidator(schema: schema, role: "member").validate(set) else {
            Issue.record("a NUL character was accepted")
            return
        }
        #expect(reason.code == .invalid)
        #expect(reason.message.contains("NUL"))
    }
}
