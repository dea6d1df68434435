import Foundation
import Testing

@testable import RevsyncWire

/// The JSON examples of PROTOCOL.md, copied verbatim, decode into the wire types.
@Suite struct ContractExampleTests {
    static let request = """
        {
          "maxRevision": 1000,
          "changeSets": [
            {
              "seq": 7,
              "types": ["screen_instances", "screen_instance_items"],
              "screen_instances": {
                "create": [-10], "update": [], "delete": [],
                "attributes": {
                  "-10": {"screen_id": 749, "date": "2014-02-01 13:15:23.487+01", "comment": ""}
                }
              },
              "screen_instance_items": {
                "create": [-11, -12], "update": [], "delete": [],
                "attributes": {
                  "-11": {"screen_instance_id": -10, "numeric_value": 2},
                  "-12": {"screen_instance_id": -10, "numeric_value": 5}
                }
              }
            }
          ]
        }
        """

    static let response = """
        {
          "maxRevision": 1001,
          "changeSets": [
            {
              "conflict": false,
              "revision": 1001,
              "seq": 7,
              "types": ["screen_instances", "screen_instance_items"],
              "screen_instances": {
                "create": [321], "update": [], "delete": [],
                "attributes": {
                  "321": {"__oldId__": -10, "revision": 1001, "screen_id": 749,
                          "date": "2014-02-01 12:15:23.487+00", "comment": ""}
                }
              },
              "screen_instance_items": {
                "create": [412, 413], "update": [], "delete": [],
                "attributes": {
                  "412": {"__oldId__": -11, "revision": 1001, "screen_instance_id": 321, "numeric_value": 2},
                  "413": {"__oldId__": -12, "revision": 1001, "screen_instance_id": 321, "numeric_value": 5}
                }
              }
            }
          ]
        }
        """

    @Test func requestExampleDecodes() throws {
        let request = try JSONDecoder().decode(SyncRequest.self, from: Data(Self.request.utf8))
        #expect(request.maxRevision == 1000)
        try #require(request.changeSets.count == 1)
        let set = request.changeSets[0]
        #expect(set.seq == 7)
        #expect(set.conflict == nil)
        #expect(set.revision == nil)
        #expect(set.types == ["screen_instances", "screen_instance_items"])

        let instances = try #require(set.entities["screen_instances"])
        #expect(instances.create == [-10])
        #expect(instances.update.isEmpty && instances.delete.isEmpty)
        #expect(instances.attributes[-10] == [
            "screen_id": .integer(749),
            "date": .string("2014-02-01 13:15:23.487+01"),
            "comment": .string(""),
        ])

        let items = try #require(set.entities["screen_instance_items"])
        #expect(items.create == [-11, -12])
        #expect(Set(items.attributes.keys) == [-11, -12])
        #expect(items.attributes[-11]?["screen_instance_id"] == .integer(-10))
        #expect(items.attributes[-11]?["numeric_value"] == .integer(2))
        #expect(items.attributes[-12]?["numeric_value"] == .integer(5))
    }

    @Test func responseExampleDecodes() throws {
        let response = try JSONDecoder().decode(SyncResponse.self, from: Data(Self.response.utf8))
        #expect(response.maxRevision == 1001)
        #expect(response.more == nil)
        try #require(response.changeSets.count == 1)
        let set = response.changeSets[0]
        #expect(set.conflict == false)
        #expect(set.revision == 1001)
        #expect(set.seq == 7)
        #expect(set.reason == nil)

        let instance = try #require(set.entities["screen_instances"]?.attributes[321])
        #expect(set.entities["screen_instances"]?.create == [321])
        #expect(instance[ReservedAttribute.oldId] == .integer(-10))
        #expect(instance[ReservedAttribute.revision] == .integer(1001))
        #expect(instance["date"] == .string("2014-02-01 12:15:23.487+00"))

        let items = try #require(set.entities["screen_instance_items"])
        #expect(items.create == [412, 413])
        #expect(items.attributes[412]?[ReservedAttribute.oldId] == .integer(-11))
        #expect(items.attributes[413]?[ReservedAttribute.oldId] == .integer(-12))
        #expect(items.attributes[413]?["screen_instance_id"] == .integer(321))
    }

    @Test func requestTimestampCanonicalizesToTheResponseForm() throws {
        // The example's device sends +01 and the server answers in UTC.
        #expect(Timestamp.canonical("2014-02-01 13:15:23.487+01") == "2014-02-01 12:15:23.487+00")
    }

    @Test func correctiveSetWithReasonDecodes() throws {
        let json = """
            {"conflict": true, "seq": 8,
             "reason": {"code": "stale_revision", "entity": "screens", "id": 5, "message": "screens 5 changed"},
             "types": ["screens"],
             "screens": {"create": [], "update": [5], "delete": [-3],
                         "attributes": {"5": {"revision": 990, "name": "Warm-up"}}}}
            """
        let set = try JSONDecoder().decode(ChangeSet.self, from: Data(json.utf8))
        #expect(set.conflict == true)
        #expect(set.revision == nil)
        #expect(set.reason == ConflictReason(code: .staleRevision, entity: "screens", id: 5, message: "screens 5 changed"))
        #expect(set.entities["screens"]?.update == [5])
        #expect(set.entities["screens"]?.delete == [-3])
    }

    @Test func everyConflictReasonCodeHasTheContractSpelling() {
        #expect(Set(ConflictReason.Code.allCases.map(\.rawValue))
            == ["stale_revision", "not_found", "forbidden", "invalid", "reference"])
    }
}
