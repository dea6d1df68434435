import Foundation
import RevsyncWire
import Testing

@testable import RevsyncDevice

@Suite("Backoff, recovery and error mapping")
struct SmallRulesTests {
    @Test func backoffGrowsExponentiallyWithEqualJitterUpToTheCap() {
        let policy = RetryPolicy(initialDelay: .seconds(1), maximumDelay: .seconds(10), multiplier: 2)
        #expect(policy.delay(forAttempt: 1, jitter: 0) == .seconds(0.5))
        #expect(policy.delay(forAttempt: 1, jitter: 1) == .seconds(1))
        #expect(policy.delay(forAttempt: 3, jitter: 0.5) == .seconds(3))
        #expect(policy.delay(forAttempt: 30, jitter: 1) == .seconds(10))
        #expect(policy.delay(forAttempt: 30, jitter: 0) == .seconds(5))
    }

    @Test func eachEnvelopeErrorHasItsRecovery() {
        #expect(SyncRecovery.decide(for: .snapshotRequired(message: ""), changeSetCount: 1) == .bootstrap)
        #expect(SyncRecovery.decide(for: .revisionAhead(message: ""), changeSetCount: 1) == .bootstrap)
        #expect(SyncRecovery.decide(for: .historyChanged(message: ""), changeSetCount: 1) == .bootstrapAnyRevision)
        #expect(SyncRecovery.decide(for: .sequenceGap(expected: 4, message: ""), changeSetCount: 1) == .renumber(expected: 4))
        #expect(
            SyncRecovery.decide(for: .seqReused(expected: 9, lowestTemporaryId: -12, message: ""), changeSetCount: 3)
                == .repairReusedSeqs(expected: 9, lowestTemporaryId: -12))
        #expect(SyncRecovery.decide(for: .tooLarge(message: ""), changeSetCount: 3) == .shrinkBatch)
        #expect(SyncRecovery.decide(for: .tooLarge(message: ""), changeSetCount: 1) == .fail)
        #expect(SyncRecovery.decide(for: .unavailable(retryAfter: .seconds(2), message: ""), changeSetCount: 1) == .retry(after: .seconds(2)))
        #expect(SyncRecovery.decide(for: .connection("reset"), changeSetCount: 1) == .retry(after: nil))
        #expect(SyncRecovery.decide(for: .serverError(status: 502, message: ""), changeSetCount: 1) == .retry(after: nil))
        #expect(SyncRecovery.decide(for: .unauthorized(message: ""), changeSetCount: 1) == .fail)
        #expect(SyncRecovery.decide(for: .rejected(status: 400, code: "invalid_json", message: ""), changeSetCount: 1) == .fail)
    }

    /// An answer of another history than the request named is not applied; a request or an
    /// answer without one (a device that never got one, a server from before it) is.
    @Test func anAnswerOfAnotherHistoryIsRefused() {
        func check(_ sent: String?, _ answered: String?) -> Bool {
            (try? ResponseApplier.checkHistory(of: SyncResponse(maxRevision: 1, history: answered), to: SyncRequest(maxRevision: 1, history: sent))) != nil
        }
        #expect(check("a", "a"))
        #expect(check(nil, "a"))
        #expect(check("a", nil))
        #expect(!check("a", "b"))
    }

    @Test func errorBodiesMapToTypedErrors() {
        func map(_ status: Int, _ body: String, retryAfter: String? = nil) -> SyncTransportError {
            ErrorResponseMapper.error(status: status, body: Array(body.utf8), retryAfter: retryAfter)
        }
        #expect(map(409, #"{"error":"sequence_gap","message":"m","expected":7}"#) == .sequenceGap(expected: 7, message: "m"))
        #expect(
            map(409, #"{"error":"seq_reused","message":"m","expected":7,"lowestTemporaryId":-40}"#)
                == .seqReused(expected: 7, lowestTemporaryId: -40, message: "m"))
        #expect(map(409, #"{"error":"seq_reused","message":"m","expected":7}"#).isRetryable, "a seq_reused without its numbers is a broken answer")
        #expect(!SyncTransportError.seqReused(expected: 7, lowestTemporaryId: 0, message: "m").isRetryable)
        #expect(map(409, #"{"error":"revision_ahead","message":"m"}"#) == .revisionAhead(message: "m"))
        #expect(map(409, #"{"error":"history_changed","message":"m"}"#) == .historyChanged(message: "m"))
        #expect(map(410, #"{"error":"snapshot_required","message":"m"}"#) == .snapshotRequired(message: "m"))
        #expect(map(401, #"{"error":"unauthorized","message":"m"}"#) == .unauthorized(message: "m"))
        #expect(map(413, #"{"error":"too_large","message":"m"}"#) == .tooLarge(message: "m"))
        #expect(map(413, "<html>Request Entity Too Large</html>") == .tooLarge(message: "<html>Request Entity Too Large</html>", byServer: false))
        #expect(map(415, #"{"error":"unsupported_encoding","message":"m"}"#) == .unsupportedEncoding(message: "m"))
        #expect(map(503, #"{"error":"unavailable","message":"m"}"#, retryAfter: "3") == .unavailable(retryAfter: .seconds(3), message: "m"))
        #expect(map(400, #"{"error":"invalid_json","message":"m"}"#) == .rejected(status: 400, code: "invalid_json", message: "m"))
        #expect(map(502, "<html>bad gateway</html>") == .serverError(status: 502, message: "<html>bad gateway</html>"))
        #expect(map(409, #"{"error":"sequence_gap","message":"m"}"#).isRetryable, "a gap without expected is a broken answer")
    }

    /// A `Retry-After` from a proxy or a hostile middlebox is obeyed up to five minutes: an hour
    /// is cut to that, and a value past what a `Duration` holds no longer traps.
    @Test func aRetryAfterIsCutToFiveMinutes() {
        #expect(ErrorResponseMapper.parseRetryAfter("2") == .seconds(2))
        #expect(ErrorResponseMapper.parseRetryAfter(" 1.5 ") == .milliseconds(1500))
        #expect(ErrorResponseMapper.parseRetryAfter("3600") == .seconds(300))
        #expect(ErrorResponseMapper.parseRetryAfter("1e16") == .seconds(300))
        #expect(ErrorResponseMapper.parseRetryAfter("99999999999999999999") == .seconds(300))
        #expect(ErrorResponseMapper.parseRetryAfter("-1") == nil)
        #expect(ErrorResponseMapper.parseRetryAfter("soon") == nil)
    }

    @Test func theOutboxIsRenumberedFromTheExpectedSeq() throws {
        let store = try seededStore()
        try store.setMeta(DeviceMeta(maxRevision: 3, nextSeq: 12, nextTemporaryId: -1, bootstrapped: true))
        try edit(store) { tx in try tx.update("teams", id: 10, ["city": "A"]) }
        try edit(store) { tx in try tx.update("teams", id: 10, ["city": "B"]) }
        #expect(try store.outbox().map(\.seq) == [12, 13])
        #expect(try OutboxRenumbering.renumber(store, from: 5))
        #expect(try store.outbox().map(\.seq) == [5, 6])
        #expect(try store.outbox().last?.entities["teams"]?.attributes[10]?["city"] == "B")
        #expect(try store.meta().nextSeq == 7)
        #expect(try !OutboxRenumbering.renumber(store, from: 9), "a server ahead of the outbox is not a gap to close")
    }

    @Test func anUndeliverableChangeSetLeavesTheOutboxAndTheNextOnesTakeItsSeq() throws {
        let store = try seededStore()
        try store.setMeta(DeviceMeta(maxRevision: 3, nextSeq: 4, nextTemporaryId: -1, bootstrapped: true))
        for city in ["A", "B", "C"] { try edit(store) { tx in try tx.update("teams", id: 10, ["city": .string(city)]) } }
        let conflict = try #require(
            try UndeliverableChangeSet.drop(seq: 5, from: store, serverMessage: "the body is over 1 MiB", serverHandledThrough: 3))
        #expect(conflict.seq == 5)
        #expect(conflict.resync)
        #expect(conflict.reason.code == .invalid)
        #expect(conflict.reason.message.contains("the body is over 1 MiB"))
        #expect(conflict.rejected?.entities["teams"]?.attributes[10]?["city"] == "B", "the change set as it was queued")
        #expect(try store.outbox().map(\.seq) == [4, 5])
        #expect(try store.outbox().last?.entities["teams"]?.attributes[10]?["city"] == "C")
        #expect(try store.meta().nextSeq == 6)
        #expect(try store.meta().needsResync)
        #expect(try UndeliverableChangeSet.drop(seq: 9, from: store, serverMessage: "", serverHandledThrough: 3) == nil, "no longer pending")

        // The last one pending: the next new change set takes its seq.
        _ = try UndeliverableChangeSet.drop(seq: 5, from: store, serverMessage: "", serverHandledThrough: 3)
        #expect(try store.outbox().map(\.seq) == [4])
        #expect(try store.meta().nextSeq == 5)
    }

    /// A seq the server has handled is never given to another change set: a retry among the
    /// later ones would look like a different change set.
    @Test func anUndeliverableChangeSetTheServerMayHaveHandledLeavesTheOthersTheirSeqs() throws {
        let store = try seededStore()
        try store.setMeta(DeviceMeta(maxRevision: 3, nextSeq: 4, nextTemporaryId: -1, bootstrapped: true))
        for city in ["A", "B", "C", "D"] { try edit(store) { tx in try tx.update("teams", id: 10, ["city": .string(city)]) } }
        _ = try UndeliverableChangeSet.drop(seq: 4, from: store, serverMessage: "", serverHandledThrough: 5)
        #expect(try store.outbox().map(\.seq) == [5, 6, 7], "at or below the server's last seq")
        var meta = try store.meta()
        meta.committedThrough = 5
        try store.setMeta(meta)
        _ = try UndeliverableChangeSet.drop(seq: 5, from: store, serverMessage: "", serverHandledThrough: 3)
        #expect(try store.outbox().map(\.seq) == [6, 7], "at or below the records' committedThrough")
        _ = try UndeliverableChangeSet.drop(seq: 6, from: store, serverMessage: "", serverHandledThrough: nil)
        #expect(try store.outbox().map(\.seq) == [7], "the server's last seq not known: its sequence_gap says where to")
        #expect(try store.meta().nextSeq == 8)
        #expect(try store.meta().needsResync)
    }

    @Test func snapshotsReplaceRecordsAndKeepPendingEdits() throws {
        let store = try seededStore()
        let player = try edit(store) { tx in
            try tx.update("teams", id: 10, ["city": "Mine"])
            return try tx.create("players", ["team_id": 10])
        }.value
        var snapshot = ChangeSet()
        snapshot.create("leagues", 1, ["revision": 1, "name": "Premier"])
        snapshot.create("teams", 10, ["revision": 30, "league_id": 1, "name": "Owls", "city": "Leeds"])
        snapshot.create("teams", 11, ["revision": 31, "league_id": 1, "name": "Rooks", "city": .null])
        let count = try SnapshotLoader.load(SyncResponse(maxRevision: 40, changeSets: [snapshot]), into: store, schema: TestSchema.schema)
        #expect(count == 3)
        #expect(try store.meta().maxRevision == 40)
        #expect(try store.record("teams", id: 10)?.revision == 30)
        #expect(try store.record("teams", id: 10)?["city"] == "Mine")
        #expect(try store.record("teams", id: 11)?["name"] == "Rooks")
        #expect(try store.record("players", id: player) != nil)
        #expect(try store.outbox().count == 1)
    }

    @Test func queriesFilterSortAndLimitLikeSQLite() throws {
        let records = [
            DeviceRecord(id: 1, revision: 1, attributes: ["name": "b", "number": 3]),
            DeviceRecord(id: 2, revision: 1, attributes: ["name": "a", "number": .null]),
            DeviceRecord(id: 3, revision: 2, attributes: ["name": "c", "number": 1]),
            DeviceRecord(id: 4, revision: 2, attributes: ["name": "a", "number": 2]),
        ]
        #expect(RecordQuery().where("name", .equal, "a").evaluate(records).map(\.id) == [2, 4])
        #expect(RecordQuery().where("number", .equal, .null).evaluate(records).map(\.id) == [2])
        #expect(RecordQuery().where("number", .greaterOrEqual, 2).evaluate(records).map(\.id) == [1, 4])
        #expect(RecordQuery().sorted(by: "number").evaluate(records).map(\.id) == [2, 3, 4, 1])
        #expect(RecordQuery().sorted(by: "name", ascending: false).limited(to: 2).evaluate(records).map(\.id) == [3, 1])
        #expect(RecordQuery().where("revision", .equal, 2).where("number", .less, 2.5).evaluate(records).map(\.id) == [3, 4])
    }

    @Test func aConflictStoredBeforeResyncExistedDecodesWithoutIt() throws {
        let stored = #"{"seq":4,"reason":{"code":"stale_revision","message":"stale"},"restored":{},"dropped":{"players":[-3]}}"#
        let conflict = try JSONDecoder().decode(ConflictNotification.self, from: Data(stored.utf8))
        #expect(conflict.seq == 4)
        #expect(!conflict.resync)
        #expect(conflict.dropped == ["players": [-3]])
        let again = try JSONDecoder().decode(ConflictNotification.self, from: JSONEncoder().encode(ConflictNotification(
            seq: 5, reason: conflict.reason, rejected: nil, restored: [:], dropped: [:], resync: true)))
        #expect(again.resync)
    }
}
