import Foundation
import NIOCore
import PostgresNIO
import RevsyncWire
import Testing
@testable import RevsyncServer

/// The contract's example exchange, byte for byte where the contract shows bytes.
@Suite struct CaseStudyExampleTests {
    static let request = """
        {
          "maxRevision": 995,
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

    static let expectedOwnChangeSet = """
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
        """

    @Test func exampleGetsPermanentIdsOldIdsRewrittenReferencesAndTheNextRevision() async throws {
        try await withTestServer { harness in
            let admin = try await harness.register("admin", name: "admin")
            // Revisions 1…1000: screen 749 exists and the id sequences stand where the example has them.
            try await harness.setNextId("screens", 749)
            let basics = try await harness.seedBasics(admin)
            #expect(basics.screen == 749)
            var seq: Int64 = 2
            while try await harness.head() < 1000 {
                let remaining = 1000 - (try await harness.head())
                let sets = (0..<min(remaining, 100)).map { index -> ChangeSet in
                    defer { seq += 1 }
                    return changeSet(seq: seq, ("teams", EntityChanges(update: [basics.team], attributes: [basics.team: ["revision": .integer(basics.revision), "city": .string("city \(seq)")]])))
                }
                _ = try await harness.sync(admin, from: try await harness.head(), sets)
            }
            #expect(try await harness.head() == 1000)
            try await harness.setNextId("screen_instances", 321)
            try await harness.setNextId("screen_instance_items", 412)

            // The device has had change sets 1…6 handled before; this is its seventh.
            let device = try await harness.register("member", name: "tablet")
            _ = try await harness.rows("UPDATE revsync_devices SET last_seq = 6 WHERE public_id = \(device.id)::uuid")
            let (status, body) = try await harness.raw("/sync", token: device.token, body: ByteBuffer(string: Self.request))
            #expect(status == .ok)
            let response = try JSONDecoder().decode(SyncResponse.self, from: Data(body.readableBytesView))

            #expect(response.maxRevision == 1001)
            #expect(response.changeSets.map(\.revision) == [996, 997, 998, 999, 1000, 1001])
            #expect(response.changeSets.allSatisfy { $0.conflict == false })
            #expect(response.changeSets.dropLast().allSatisfy { $0.seq == nil })
            let own = try #require(response.changeSets.last)
            let expected = try JSONDecoder().decode(ChangeSet.self, from: Data(Self.expectedOwnChangeSet.utf8))
            #expect(own.seq == 7)
            #expect(own.types == expected.types)
            for entity in expected.types {
                let mine = try #require(own.entities[entity]), theirs = try #require(expected.entities[entity])
                #expect(mine.create == theirs.create)
                #expect(mine.update.isEmpty && mine.delete.isEmpty)
                for (id, attributes) in theirs.attributes {
                    let got = try #require(mine.attributes[id])
                    for (name, value) in attributes { #expect(got[name] == value, "\(entity) \(id) \(name)") }
                    // Attributes of our schema that the example does not show are there, as null.
                    for (name, value) in got where attributes[name] == nil { #expect(value == .null, "\(entity) \(id) \(name)") }
                }
            }

            // Another device catching up sees the same change set without __oldId__ or seq.
            let other = try await harness.register("member", name: "other")
            let catchUp = try await harness.sync(other, from: 1000)
            let seen = try #require(catchUp.changeSets.first)
            #expect(catchUp.maxRevision == 1001 && catchUp.changeSets.count == 1)
            #expect(seen.seq == nil)
            #expect(seen.entities["screen_instances"]?.attributes[321]?[ReservedAttribute.oldId] == nil)
            #expect(seen.entities["screen_instance_items"]?.attributes[413]?["screen_instance_id"] == .integer(321))
            #expect(seen.entities["screen_instances"]?.attributes[321]?["date"] == "2014-02-01 12:15:23.487+00")
        }
    }
}
