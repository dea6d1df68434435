import Foundation
import RevsyncWire
import Testing
@testable import RevsyncServer

/// Each kind of rejection rolls back its whole change set, consumes no revision,
/// and leaves the request's other change sets applied.
@Suite struct ConflictTests {
    /// One way to make a change set fail, prepared on the seeded dataset.
    struct Case: Sendable, CustomTestStringConvertible {
        let name: String
        let code: ConflictReason.Code
        /// Prepares the dataset (as the admin) and returns the failing operation, plus what the corrective set must hold.
        let prepare: @Sendable (TestHarness, TestDevice, Basics) async throws -> (operation: (String, EntityChanges), update: Set<String>, delete: Set<String>)
        var testDescription: String { name }
    }

    static let cases: [Case] = [
        Case(name: "stale revision", code: .staleRevision) { harness, admin, basics in
            _ = try await harness.sync(admin, from: basics.revision, [changeSet(seq: 2, ("teams", EntityChanges(update: [basics.team], attributes: [basics.team: ["revision": .integer(basics.revision), "city": "Basel"]])))])
            return (("teams", EntityChanges(update: [basics.team], attributes: [basics.team: ["revision": .integer(basics.revision), "city": "Bern"]])), ["teams \(basics.team)"], [])
        },
        Case(name: "deleted record", code: .notFound) { harness, admin, basics in
            _ = try await harness.sync(admin, from: basics.revision, [changeSet(seq: 2, ("screen_items", EntityChanges(delete: [basics.screenItem], attributes: [basics.screenItem: ["revision": .integer(basics.revision)]])))])
            return (("screen_items", EntityChanges(update: [basics.screenItem], attributes: [basics.screenItem: ["revision": .integer(basics.revision), "label": "200 m"]])), [], ["screen_items \(basics.screenItem)"])
        },
        Case(name: "forbidden delete", code: .forbidden) { harness, admin, basics in
            let created = try await harness.sync(admin, from: basics.revision, [changeSet(
                seq: 2,
                ("screen_instances", EntityChanges(create: [-20], attributes: [-20: ["screen_id": .integer(basics.screen), "date": "2024-05-01T10:00:00Z"]])),
                ("screen_instance_items", EntityChanges(create: [-21, -22], attributes: [-21: ["screen_instance_id": -20, "numeric_value": 1.5], -22: ["screen_instance_id": -20, "numeric_value": 3]])))])
            let ack = try #require(created.committed.last)
            let instance = try #require(ack.permanentId(of: -20, in: "screen_instances"))
            let items = [try #require(ack.permanentId(of: -21, in: "screen_instance_items")), try #require(ack.permanentId(of: -22, in: "screen_instance_items"))]
            return (("screen_instances", EntityChanges(delete: [instance], attributes: [instance: ["revision": .integer(ack.revision ?? 0)]])),
                    Set(["screen_instances \(instance)"] + items.map { "screen_instance_items \($0)" }), [])
        },
        Case(name: "missing parent", code: .reference) { _, _, _ in
            (("screen_items", EntityChanges(create: [-30], attributes: [-30: ["screen_id": 99_999, "label": "x", "kind": "time", "sort_order": 2]])), [], ["screen_items -30", "screens 99999"])
        },
        Case(name: "unknown temporary id", code: .reference) { _, _, _ in
            (("screen_items", EntityChanges(create: [-31], attributes: [-31: ["screen_id": -77, "label": "x", "kind": "time", "sort_order": 2]])), [], ["screen_items -31", "screens -77"])
        },
        Case(name: "invalid attributes", code: .invalid) { _, _, basics in
            (("screens", EntityChanges(create: [-32], attributes: [-32: ["team_id": .integer(basics.team), "name": "Jumps", "sort_order": "high"]])), ["teams \(basics.team)"], ["screens -32"])
        },
    ]

    @Test(arguments: cases)
    func rejectedChangeSetRollsBackWholeAndOthersApply(_ kind: Case) async throws {
        try await withTestServer { harness in
            let admin = try await harness.register("admin", name: "admin")
            let member = try await harness.register("member", name: "member")
            let basics = try await harness.seedBasics(admin)
            let (operation, update, delete) = try await kind.prepare(harness, admin, basics)
            let headBefore = try await harness.head()
            let note = { (seq: Int64, temporary: Int64) in changeSet(seq: seq, ("notes", EntityChanges(create: [temporary], attributes: [temporary: ["body": .string("note \(seq)"), "pinned": false]]))) }
            // The failing set also creates a note: it must vanish with the rest of the set.
            var failing = changeSet(seq: 2, ("notes", EntityChanges(create: [-2], attributes: [-2: ["body": "doomed", "pinned": true]])))
            failing[operation.0] = operation.1
            let response = try await harness.sync(member, from: headBefore, [note(1, -1), failing, note(3, -3)])

            #expect(response.committed.map(\.seq) == [1, 3])
            #expect(try await harness.head() == headBefore + 2)
            #expect(try await harness.count("notes") == 2)
            let corrective = try #require(response.corrective.first)
            #expect(response.corrective.count == 1)
            #expect(corrective.seq == 2)
            #expect(corrective.revision == nil)
            #expect(corrective.reason?.code == kind.code)
            let updated = Set(corrective.entities.flatMap { entity, changes in changes.update.map { "\(entity) \($0)" } })
            let deleted = Set(corrective.entities.flatMap { entity, changes in changes.delete.map { "\(entity) \($0)" } })
            #expect(update.isSubset(of: updated), "corrective updates \(updated)")
            #expect(delete.isSubset(of: deleted), "corrective deletes \(deleted)")
            #expect(deleted.contains("notes -2"))
            // Records under update are complete and carry their revision.
            for (entity, changes) in corrective.entities {
                for id in changes.update {
                    let attributes = try #require(changes.attributes[id])
                    #expect(attributes["revision"]?.integerValue ?? 0 > 0, "\(entity) \(id) has its revision")
                }
            }
        }
    }

    @Test func ownPendingWritesDoNotConflictButAnotherDevicesWriteDoes() async throws {
        try await withTestServer { harness in
            let admin = try await harness.register("admin", name: "admin")
            let member = try await harness.register("member", name: "member")
            let basics = try await harness.seedBasics(admin)
            let edit = { (seq: Int64, basis: Int64, city: String) in
                changeSet(seq: seq, ("teams", EntityChanges(update: [basics.team], attributes: [basics.team: ["revision": .integer(basis), "city": .string(city)]])))
            }
            // Two pending edits made on revision 1 both apply: the second only follows the first.
            let first = try await harness.sync(member, from: basics.revision, [edit(1, basics.revision, "Zug"), edit(2, basics.revision, "Chur")])
            #expect(first.committed.map(\.seq) == [1, 2])
            #expect(first.corrective.isEmpty)
            // Another device writes; the member's next edit, made on what it has, conflicts.
            let adminEdit = try await harness.sync(admin, from: first.maxRevision, [edit(2, first.maxRevision, "Thun")])
            #expect(adminEdit.corrective.isEmpty)
            let second = try await harness.sync(member, from: first.maxRevision, [edit(3, first.maxRevision, "Biel")])
            #expect(second.corrective.first?.reason?.code == .staleRevision)
            let team = try #require(second.corrective.first?.entities["teams"]?.attributes[basics.team])
            #expect(team["city"] == "Thun")
            #expect(team["revision"] == .integer(adminEdit.maxRevision))
        }
    }
}
