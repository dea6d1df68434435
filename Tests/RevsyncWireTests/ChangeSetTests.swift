import Foundation
import Testing

@testable import RevsyncWire

@Suite struct ChangeSetDecodingTests {
    private func decode(_ json: String) throws -> ChangeSet {
        try JSONDecoder().decode(ChangeSet.self, from: Data(json.utf8))
    }

    private let emptyEntity = #"{"create": [], "update": [], "delete": [], "attributes": {}}"#

    @Test func typeListedWithoutItsObjectIsRejected() {
        #expect(throws: DecodingError.self) {
            try decode(#"{"types": ["screens", "teams"], "screens": \#(emptyEntity)}"#)
        }
    }

    @Test func entityObjectNotListedInTypesIsRejected() {
        #expect(throws: DecodingError.self) {
            try decode(#"{"types": ["screens"], "screens": \#(emptyEntity), "teams": \#(emptyEntity)}"#)
        }
    }

    @Test func entityObjectWithoutAnyTypesIsRejected() {
        #expect(throws: DecodingError.self) {
            try decode(#"{"seq": 1, "teams": \#(emptyEntity)}"#)
        }
    }

    @Test func typeListedTwiceIsRejected() {
        #expect(throws: DecodingError.self) {
            try decode(#"{"types": ["screens", "screens"], "screens": \#(emptyEntity)}"#)
        }
    }

    @Test func attributeKeyThatIsNotAnIntegerIsRejected() {
        #expect(throws: DecodingError.self) {
            try decode(#"{"types": ["screens"], "screens": {"create": [], "update": [1], "delete": [], "attributes": {"x1": {"revision": 3}}}}"#)
        }
    }

    @Test func nonIntegerIdInAListIsRejected() {
        #expect(throws: DecodingError.self) {
            try decode(#"{"types": ["screens"], "screens": {"create": ["-1"], "update": [], "delete": []}}"#)
        }
        #expect(throws: DecodingError.self) {
            try decode(#"{"types": ["screens"], "screens": {"create": [], "update": [1.5], "delete": []}}"#)
        }
    }

    @Test func missingListsAndAttributesDecodeAsEmpty() throws {
        let set = try decode(#"{"types": ["screens"], "screens": {"delete": [4]}}"#)
        #expect(set.entities["screens"] == EntityChanges(delete: [4]))
    }

    @Test func reservedKeysAreNotMistakenForEntities() throws {
        let set = try decode(#"{"seq": 3, "conflict": false, "revision": 12, "types": []}"#)
        #expect(set.seq == 3)
        #expect(set.revision == 12)
        #expect(set.conflict == false)
        #expect(set.types.isEmpty)
        #expect(set.entities.isEmpty)
    }
}

@Suite struct ChangeSetEncodingTests {
    @Test func encodeThenDecodePreservesEverything() throws {
        var original = ChangeSet(
            seq: 9, conflict: true, revision: 1234,
            reason: ConflictReason(code: .reference, entity: "players", id: -4, message: "temporary id -4 is unknown"))
        original["players"] = EntityChanges(
            create: [-1, -2], update: [17, -3], delete: [18],
            attributes: [
                -1: ["name": "Ann \"the\" \\ 🏀\n", "number": 7, "rating": 2.5, "active": true, "team_id": nil],
                -2: ["name": "", "number": -9_007_199_254_740_993, "rating": 1e300, "active": false],
                17: ["revision": 3, "number": .integer(Int64.max)],
                -3: ["revision": 0, "rating": 0.1],
                18: ["revision": 5],
            ])
        original["teams"] = EntityChanges(update: [2], attributes: [2: ["revision": 1, "city": "Zürich"]])

        let data = try JSONEncoder().encode(original)
        let decoded = try JSONDecoder().decode(ChangeSet.self, from: data)
        #expect(decoded == original)
        #expect(decoded.types == ["players", "teams"])
    }

    @Test func subscriptListsANewEntityOnceInOrderOfFirstUse() {
        var set = ChangeSet()
        set["teams"].update.append(1)
        set["players"].delete.append(2)
        set["teams"].update.append(3)
        #expect(set.types == ["teams", "players"])
        #expect(set["teams"].update == [1, 3])
        #expect(set["nothing"] == EntityChanges())
        #expect(set.types == ["teams", "players"])
    }

    @Test func encodedChangeSetAlwaysHasTypesAndFullEntityObjects() throws {
        var set = ChangeSet()
        set["teams"].delete = [5]
        let object = try #require(
            try JSONSerialization.jsonObject(with: JSONEncoder().encode(set)) as? [String: Any])
        #expect(object["types"] as? [String] == ["teams"])
        #expect(object["seq"] == nil)
        #expect(object["conflict"] == nil)
        let teams = try #require(object["teams"] as? [String: Any])
        #expect(Set(teams.keys) == ["create", "update", "delete", "attributes"])
    }

    @Test func requestAndResponseRoundTrip() throws {
        var set = ChangeSet(seq: 1)
        set["notes"] = EntityChanges(create: [-1], attributes: [-1: ["body": "hi", "pinned": false]])
        let request = SyncRequest(maxRevision: 0, changeSets: [set])
        #expect(try JSONDecoder().decode(SyncRequest.self, from: JSONEncoder().encode(request)) == request)

        let response = SyncResponse(maxRevision: 40, changeSets: [set], more: true)
        #expect(try JSONDecoder().decode(SyncResponse.self, from: JSONEncoder().encode(response)) == response)
    }
}
