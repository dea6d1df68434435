import Foundation
import RevsyncWire
import Testing
@testable import RevsyncServer

/// `seq` makes retries safe: a change set applies at most once and never out of order.
@Suite struct RetryTests {
    @Test func sameRequestTwiceGivesTheSameOutcomeAndNoDuplicates() async throws {
        try await withTestServer { harness in
            let admin = try await harness.register("admin", name: "admin")
            let basics = try await harness.seedBasics(admin)
            let member = try await harness.register("member", name: "member")
            let request = [
                changeSet(seq: 1, ("notes", EntityChanges(create: [-1], attributes: [-1: ["body": "hello", "pinned": false]]))),
                changeSet(seq: 2, ("screens", EntityChanges(create: [-2], attributes: [-2: ["team_id": .integer(basics.team), "name": "x", "sort_order": "bad"]]))),
            ]
            let first = try await harness.sync(member, from: basics.revision, request)
            let head = try await harness.head()
            let second = try await harness.sync(member, from: basics.revision, request)
            #expect(try await harness.head() == head)
            #expect(try await harness.count("notes") == 1)
            #expect(try await harness.count("screens") == 1)
            #expect(second.committed == first.committed)
            #expect(second.corrective.map(\.reason) == first.corrective.map(\.reason))
            #expect(first.committed.first?.permanentId(of: -1, in: "notes") != nil)
        }
    }

    @Test func lostResponseThenNewChangeSetReferencingItsTemporaryIdsResolves() async throws {
        try await withTestServer { harness in
            let admin = try await harness.register("admin", name: "admin")
            let basics = try await harness.seedBasics(admin)
            let member = try await harness.register("member", name: "member")
            let createItem = changeSet(seq: 1, ("screen_items", EntityChanges(create: [-1], attributes: [-1: ["screen_id": .integer(basics.screen), "label": "jump", "kind": "distance", "sort_order": 2]])))
            // The server commits this, but the device never sees the answer.
            _ = try await harness.sync(member, from: basics.revision, [createItem])
            let useItem = changeSet(
                seq: 2,
                ("screen_instances", EntityChanges(create: [-2], attributes: [-2: ["screen_id": .integer(basics.screen), "date": "2024-05-01 09:00:00+02"]])),
                ("screen_instance_items", EntityChanges(create: [-3], attributes: [-3: ["screen_instance_id": -2, "screen_item_id": -1, "numeric_value": 4.2]])))
            let response = try await harness.sync(member, from: basics.revision, [createItem, useItem])
            #expect(response.committed.map(\.seq) == [1, 2])
            #expect(response.corrective.isEmpty)
            let itemId = try #require(response.committed[0].permanentId(of: -1, in: "screen_items"))
            let instanceItem = try #require(response.committed[1].entities["screen_instance_items"]?.attributes.values.first)
            #expect(instanceItem["screen_item_id"] == .integer(itemId))
            #expect(try await harness.count("screen_items") == 2)
        }
    }

    @Test func sequenceGapIsRefusedAndAppliesNothing() async throws {
        try await withTestServer { harness in
            let member = try await harness.register("member", name: "member")
            let note = { (seq: Int64) in changeSet(seq: seq, ("notes", EntityChanges(create: [-seq], attributes: [-seq: ["body": "n", "pinned": false]]))) }
            let (status, body) = try await harness.post(member, SyncRequest(maxRevision: 0, changeSets: [note(1), note(3)]))
            #expect(status == .conflict)
            let error = try harness.error(body)
            #expect(error.error == "sequence_gap")
            #expect(error.expected == 2)
            #expect(try await harness.head() == 0)
            #expect(try await harness.count("notes") == 0)
        }
    }

    @Test func rejectedSeqRetriedGetsAFreshCorrectiveSet() async throws {
        try await withTestServer { harness in
            let admin = try await harness.register("admin", name: "admin")
            let basics = try await harness.seedBasics(admin)
            let member = try await harness.register("member", name: "member")
            let stale = changeSet(seq: 1, ("teams", EntityChanges(update: [basics.team], attributes: [basics.team: ["revision": 0, "city": "Olten"]])))
            _ = try await harness.sync(admin, from: basics.revision, [changeSet(seq: 2, ("teams", EntityChanges(update: [basics.team], attributes: [basics.team: ["revision": .integer(basics.revision), "city": "Aarau"]])))])
            let first = try await harness.sync(member, from: 0, [stale])
            #expect(first.corrective.first?.entities["teams"]?.attributes[basics.team]?["city"] == "Aarau")
            _ = try await harness.sync(admin, from: 0, [changeSet(seq: 3, ("teams", EntityChanges(update: [basics.team], attributes: [basics.team: ["revision": .integer(first.maxRevision), "city": "Sion"]])))])
            let again = try await harness.sync(member, from: first.maxRevision, [stale])
            #expect(again.corrective.first?.reason?.code == .staleRevision)
            #expect(again.corrective.first?.entities["teams"]?.attributes[basics.team]?["city"] == "Sion")
        }
    }
}
