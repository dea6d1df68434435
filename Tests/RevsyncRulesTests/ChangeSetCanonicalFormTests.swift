import Foundation
import RevsyncRules
import RevsyncWire
import Testing

/// The identity of a change set's content, judged as a device that rewrites mapped temporary ids would want.
@Suite struct ChangeSetCanonicalFormTests {
    let schema: DatasetSchema

    init() throws {
        schema = try Fixtures.defaultSchema()
    }

    /// A pending change set as first sent: it updates and references records created by earlier ones.
    private func sent(seq: Int64 = 4, noteId: Int64 = -5, authorId: Int64 = -8, body: String = "edited") -> ChangeSet {
        var set = ChangeSet(seq: seq)
        set.update("notes", noteId, revision: 0, ["body": .string(body), "author_id": .integer(authorId)])
        set.create("screen_instances", -20, ["screen_id": 749, "date": "2024-01-01"])
        set.create("screen_instance_items", -21, ["screen_instance_id": -20, "screen_item_id": 44])
        return set
    }

    private let mapped: [Int64: Int64] = [-5: 500, -8: 800, -20: 2000, -21: 2100]

    private func bytes(_ set: ChangeSet) -> [UInt8] {
        ChangeSetCanonicalForm.bytes(set, schema: schema, permanentIds: mapped)
    }

    @Test func rewritingMappedTemporaryIdsKeepsTheIdentity() {
        #expect(bytes(sent()) == bytes(sent(noteId: 500, authorId: 800)))
    }

    @Test func idsCreatedInTheSetAreNeverResolved() {
        // -20 and -21 are this set's own creations: even once mapped (after it applied) they keep their temporary ids.
        let ids = ChangeSetCanonicalForm.temporaryIdsToResolve(sent(), schema: schema)
        #expect(ids == [-5, -8])
        #expect(String(decoding: bytes(sent()), as: UTF8.self).contains("-21"))
    }

    @Test func otherContentOrOtherRecordsDiffer() {
        #expect(bytes(sent()) != bytes(sent(body: "SECOND different edit")))
        #expect(bytes(sent()) != bytes(sent(noteId: 501)))
        #expect(bytes(sent()) != bytes(sent(authorId: 801)))
    }

    @Test func seqIsNotPartOfTheIdentity() {
        #expect(bytes(sent(seq: 4)) == bytes(sent(seq: 9)))
    }

    /// Made before the device's mappings are read: only when no mapping could change them.
    @Test func bytesWithoutMappingsAreTheSameBytesOrNil() {
        // Temporary ids only in creates (and references to them), permanent ids elsewhere.
        let resolved = sent(noteId: 500, authorId: 800)
        #expect(ChangeSetCanonicalForm.bytesWithoutMappings(resolved, schema: schema) == bytes(resolved))
        #expect(ChangeSetCanonicalForm.bytesWithoutMappings(resolved, schema: schema) == ChangeSetCanonicalForm.bytes(resolved, schema: schema, permanentIds: [:]))
        // A temporary id outside the creates: in an update, a reference, an attribute key, a delete.
        #expect(ChangeSetCanonicalForm.bytesWithoutMappings(sent(noteId: -5, authorId: 800), schema: schema) == nil)
        #expect(ChangeSetCanonicalForm.bytesWithoutMappings(sent(noteId: 500, authorId: -8), schema: schema) == nil)
        var keyed = ChangeSet(seq: 1)
        keyed["notes"] = EntityChanges(attributes: [-5: ["body": "attributes of a record it neither creates nor updates"]])
        #expect(ChangeSetCanonicalForm.bytesWithoutMappings(keyed, schema: schema) == nil)
        var deleting = ChangeSet(seq: 1)
        deleting["notes"] = EntityChanges(delete: [-5])
        #expect(ChangeSetCanonicalForm.bytesWithoutMappings(deleting, schema: schema) == nil)
    }
}

@Suite struct OneNamePerRecordTests {
    @Test func temporaryAndPermanentIdOfOneRecordInOneSetIsInvalid() throws {
        let schema = try Fixtures.defaultSchema()
        var set = ChangeSet(seq: 2)
        set.update("notes", -5, revision: 0, ["body": "by temporary id"])
        set.update("notes", 500, revision: 0, ["body": "by permanent id"])
        let normalized = try ChangeSetValidator(schema: schema, role: "admin").validate(set).get()
        let result = TemporaryIdResolver.resolve(normalized, schema: schema, known: [-5: TemporaryIdMapping(entity: "notes", id: 500)])
        guard case .failure(let reason) = result else {
            Issue.record("the set resolved although it names notes 500 twice")
            return
        }
        #expect(reason.code == .invalid)
        #expect(reason.id == 500)
    }

    @Test func emptyChangeSetIsInvalid() throws {
        let schema = try Fixtures.defaultSchema()
        var set = ChangeSet(seq: 1)
        set["notes"] = EntityChanges()
        let result = ChangeSetValidator(schema: schema, role: "admin").validate(set)
        guard case .failure(let reason) = result else {
            Issue.record("an empty change set was accepted")
            return
        }
        #expect(reason.code == .invalid)
    }
}
