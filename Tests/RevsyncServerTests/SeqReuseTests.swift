import Foundation
import PostgresNIO
import RevsyncWire
import Testing
@testable import RevsyncServer

/// A seq names one change set forever: a repeat with the same content replays its outcome,
/// a different change set under a used seq is refused as `seq_reused` and nothing applies.
@Suite struct SeqReuseTests {
    static func note(_ seq: Int64, temporary: Int64, _ body: String) -> ChangeSet {
        changeSet(seq: seq, ("notes", EntityChanges(create: [temporary], attributes: [temporary: ["body": .string(body), "pinned": false]])))
    }

    @Test func restoredDeviceSendingANewEditUnderAnOldSeqIsRefusedAndNothingApplies() async throws {
        try await withTestServer { harness in
            let device = try await harness.register("member", name: "phone")
            let first = try await harness.sync(device, from: 0, [Self.note(1, temporary: -1, "first")])
            let head = try await harness.head()
            // The phone restored from an old backup: same token, its counters back at the start.
            let (status, body) = try await harness.post(
                device, SyncRequest(maxRevision: 0, changeSets: [Self.note(1, temporary: -1, "SECOND different edit"), Self.note(2, temporary: -2, "third")]))
            #expect(status == .conflict)
            let error = try harness.error(body)
            #expect(error.error == "seq_reused")
            #expect(error.expected == 2)
            #expect(error.lowestTemporaryId == -1)
            #expect(error.seq == 1)
            #expect(try await harness.head() == head)
            #expect(try await harness.count("notes") == 1)
            // Renumbered after the server's counters, the new edits apply.
            let renumbered = try await harness.sync(
                device, from: first.maxRevision, [Self.note(2, temporary: -2, "SECOND different edit"), Self.note(3, temporary: -3, "third")])
            #expect(renumbered.committed.map(\.seq) == [2, 3])
            #expect(try await harness.count("notes") == 3)
        }
    }

    @Test func retryWhoseTemporaryIdsTheDeviceRewroteIsTheSameChangeSet() async throws {
        try await withTestServer { harness in
            let admin = try await harness.register("admin", name: "admin")
            let basics = try await harness.seedBasics(admin)
            let member = try await harness.register("member", name: "member")
            let item = changeSet(seq: 1, ("screen_items", EntityChanges(create: [-1], attributes: [-1: ["screen_id": .integer(basics.screen), "label": "jump", "kind": "distance", "sort_order": 2]])))
            let acknowledged = try await harness.sync(member, from: basics.revision, [item])
            let itemId = try #require(acknowledged.committed.first?.permanentId(of: -1, in: "screen_items"))
            func update(_ id: Int64) -> ChangeSet {
                changeSet(seq: 2, ("screen_items", EntityChanges(update: [id], attributes: [id: ["revision": 0, "label": "long jump"]])))
            }
            // Sent with the temporary id; the answer is lost.
            let sent = try await harness.sync(member, from: acknowledged.maxRevision, [update(-1)])
            let revision = try #require(sent.committed.last?.revision)
            // The device has meanwhile learned -1's permanent id and rewritten its outbox.
            let retried = try await harness.sync(member, from: acknowledged.maxRevision, [update(itemId)])
            #expect(retried.committed.last?.revision == revision)
            #expect(retried.committed.last?.seq == 2)
            #expect(try await harness.head() == revision)
        }
    }

    @Test func rejectedSeqRepeatedWithOtherContentIsRefused() async throws {
        try await withTestServer { harness in
            let device = try await harness.register("member", name: "phone")
            let invalid = changeSet(seq: 1, ("notes", EntityChanges(create: [-1], attributes: [-1: ["body": 5, "pinned": false]])))
            let first = try await harness.sync(device, from: 0, [invalid])
            #expect(first.corrective.first?.reason?.code == .invalid)
            // The same rejected change set again: a fresh corrective set, built from the copy sent.
            let again = try await harness.sync(device, from: 0, [invalid])
            #expect(again.corrective.first?.reason?.code == .invalid)
            #expect(again.corrective.first?.seq == 1)
            let (status, body) = try await harness.post(device, SyncRequest(maxRevision: 0, changeSets: [Self.note(1, temporary: -1, "fixed")]))
            #expect(status == .conflict)
            #expect(try harness.error(body).error == "seq_reused")
            #expect(try await harness.count("notes") == 0)
        }
    }

    @Test func rejectionsArePrunedWithTheLogAndTheirSeqsCannotBeReplayed() async throws {
        try await withTestServer(configure: { $0.logRetention = 1 }) { harness in
            let device = try await harness.register("member", name: "phone")
            let invalid = changeSet(seq: 1, ("notes", EntityChanges(create: [-1], attributes: [-1: ["body": 5, "pinned": false]])))
            _ = try await harness.sync(device, from: 0, [invalid])
            let applied = try await harness.sync(device, from: 0, [Self.note(2, temporary: -2, "a"), Self.note(3, temporary: -3, "b")])
            let kept = try await harness.rows("SELECT count(*)::int FROM revsync_outcomes WHERE revision IS NULL").first?.decode(Int.self)
            #expect(kept == 1)
            _ = try await harness.server.pruner.pruneOnce()
            let left = try await harness.rows("SELECT count(*)::int FROM revsync_outcomes WHERE revision IS NULL").first?.decode(Int.self)
            #expect(left == 0)
            let (status, body) = try await harness.post(device, SyncRequest(maxRevision: applied.maxRevision, changeSets: [invalid]))
            #expect(status == .conflict)
            #expect(try harness.error(body).error == "seq_reused")
            #expect(try harness.error(body).expected == 4)
        }
    }
}
