import Foundation
import RevsyncWire
import Testing
@testable import RevsyncServer

/// Read-only means read-only, and one change set names each record once.
@Suite struct WriteRuleTests {
    @Test func emptyChangeSetsAreInvalidAndTakeNoRevision() async throws {
        try await withTestServer { harness in
            let viewer = try await harness.register("viewer", name: "viewer")
            let empty = (1...3).map { ChangeSet(seq: Int64($0)) }
            let response = try await harness.sync(viewer, from: 0, empty)
            #expect(response.committed.isEmpty)
            #expect(response.corrective.map(\.reason?.code) == [.invalid, .invalid, .invalid])
            #expect(try await harness.head() == 0)
            // A listed entity with empty lists is no operation either.
            let listed = try await harness.sync(viewer, from: 0, [changeSet(seq: 4, ("notes", EntityChanges()))])
            #expect(listed.corrective.first?.reason?.code == .invalid)
            #expect(try await harness.head() == 0)
        }
    }

    @Test func viewerCannotWriteAnything() async throws {
        try await withTestServer { harness in
            let viewer = try await harness.register("viewer", name: "viewer")
            let note = changeSet(seq: 1, ("notes", EntityChanges(create: [-1], attributes: [-1: ["body": "x", "pinned": false]])))
            let response = try await harness.sync(viewer, from: 0, [note])
            #expect(response.corrective.first?.reason?.code == .forbidden)
            #expect(try await harness.head() == 0)
        }
    }

    @Test func recordNamedByItsTemporaryAndItsPermanentIdInOneSetIsInvalid() async throws {
        try await withTestServer { harness in
            let member = try await harness.register("member", name: "member")
            let created = try await harness.sync(member, from: 0, [changeSet(seq: 1, ("notes", EntityChanges(create: [-1], attributes: [-1: ["body": "a", "pinned": false]])))])
            let id = try #require(created.committed.first?.permanentId(of: -1, in: "notes"))
            let both = changeSet(seq: 2, ("notes", EntityChanges(
                update: [-1, id], attributes: [-1: ["revision": 0, "body": "by temporary id"], id: ["revision": 0, "body": "by permanent id"]])))
            let response = try await harness.sync(member, from: created.maxRevision, [both])
            let reason = try #require(response.corrective.first?.reason)
            #expect(reason.code == .invalid)
            #expect(reason.message.contains("named twice"))
            #expect(try await harness.head() == created.maxRevision)
        }
    }
}
