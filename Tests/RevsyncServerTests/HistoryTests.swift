import Foundation
import Hummingbird
import NIOCore
import PostgresNIO
import RevsyncRules
import RevsyncSnapshotFile
import RevsyncTestSupport
import RevsyncWire
import Synchronization
import Testing
@testable import RevsyncServer

/// The database's history id (`HistoryRules`): a database that went back (restored from a
/// backup, failed over with commits lost) numbers its next commits as revisions devices may
/// hold with other contents; the renewed id makes those devices load a new snapshot.
@Suite(.timeLimit(.minutes(3))) struct HistoryTests {
    /// What a restore from a backup taken at `revision` leaves: the log and the head back there.
    /// (The records are left as they are: the history id is about the log's numbering.)
    static func goBack(_ harness: TestHarness, to revision: Int64) async throws {
        _ = try await harness.rows("DELETE FROM revsync_log WHERE revision > \(revision)")
        _ = try await harness.rows("UPDATE revsync_head SET head = \(revision)")
    }

    static func history(_ harness: TestHarness) async throws -> String {
        try await PostgresHistory(database: harness.server.database).read().id
    }

    /// A sync request naming `history`, its status and error code.
    static func sync(_ harness: TestHarness, _ device: TestDevice, from revision: Int64, history: String?) async throws -> (HTTPResponse.Status, ErrorBody?, SyncResponse?) {
        let (status, body) = try await harness.post(device, SyncRequest(maxRevision: revision, history: history), gzip: true)
        guard status == .ok else { return (status, try? harness.error(body), nil) }
        return (status, nil, try JSONDecoder().decode(SyncResponse.self, from: Data(body.readableBytesView)))
    }

    @Test func answersCarryTheDatabasesHistoryAndAnotherIsRefused() async throws {
        try await withTestServer { harness in
            let device = try await harness.register()
            let head = try await CacheTests.write(harness, device, count: 3)
            let history = try await Self.history(harness)
            let answer = try await harness.sync(device, from: 0)
            #expect(answer.history == history)
            // The plain answer and the JSON snapshot carry it too.
            let (_, plain) = try await harness.post(device, SyncRequest(maxRevision: head, history: history))
            #expect(try JSONDecoder().decode(SyncResponse.self, from: Data(plain.readableBytesView)).history == history)
            let (_, snapshot) = try await harness.raw("/snapshot", method: .get, token: device.token)
            #expect(try JSONDecoder().decode(SyncResponse.self, from: Data(snapshot.readableBytesView)).history == history)

            #expect(try await Self.sync(harness, device, from: head, history: history).0 == .ok)
            #expect(try await Self.sync(harness, device, from: head, history: nil).0 == .ok)
            let (status, error, _) = try await Self.sync(harness, device, from: head, history: UUID().uuidString.lowercased())
            #expect(status == .conflict)
            #expect(error?.error == "history_changed")
            // A writing request too, before anything of it applies.
            let write = SyncRequest(maxRevision: head, changeSets: CacheTests.notes(from: 4, count: 1), history: "not-this-one")
            let (writeStatus, writeBody) = try await harness.post(device, write, gzip: false)
            #expect(writeStatus == .conflict)
            #expect(try harness.error(writeBody).error == "history_changed")
            #expect(try await harness.head() == head)
        }
    }

    /// The instance reads the head every interval: one below what it saw is a database that went
    /// back, and it renews the id. A device at a revision the database numbers again is refused.
    @Test func aDatabaseThatWentBackUnderARunningInstanceRenewsItsHistory() async throws {
        try await withTestServer(configure: { $0.redisURL = nil; $0.historyCheckInterval = .milliseconds(50) }) { harness in
            let writer = try await harness.register(name: "writer")
            let reader = try await harness.register(name: "reader")
            let head = try await CacheTests.write(harness, writer, count: 5)
            let old = try await Self.history(harness)
            #expect(try await harness.sync(reader, from: 0).history == old)
            try await eventually("the instance seeing head \(head)") { harness.server.history.history.highestSeen >= head }

            try await Self.goBack(harness, to: 2)
            try await eventually("the history renewed") { try await Self.history(harness) != old }
            let renewed = try await Self.history(harness)
            try await eventually("the instance holding the new id") { harness.server.history.history.id == renewed }
            // The reader held revisions 3…5 of the old line: the database numbers its next commits so.
            _ = try await harness.sync(writer, from: 2, CacheTests.notes(from: 6, count: 3))
            #expect(try await harness.head() == 5)
            let (status, error, _) = try await Self.sync(harness, reader, from: 5, history: old)
            #expect(status == .conflict)
            #expect(error?.error == "history_changed")
            let (fresh, _, answer) = try await Self.sync(harness, reader, from: 5, history: renewed)
            #expect(fresh == .ok)
            #expect(answer?.history == renewed)
        }
    }

    /// A request waiting for a commit when the database goes back waits for a revision the new
    /// line may not reach for long (the CI soak's device sat out its whole wait, then the drain
    /// took it for converged): it is answered at once, naming the new id, so its device loads a
    /// new snapshot. A wait of the new line then parks against the new head, not the old one,
    /// which would wake it at once, again and again.
    @Test func requestsWaitingWhenTheHistoryIsRenewedAreAnsweredAtOnce() async throws {
        try await withTestServer(configure: { $0.redisURL = nil; $0.historyCheckInterval = .seconds(600) }) { harness in
            let writer = try await harness.register(name: "writer")
            let reader = try await harness.register(name: "reader")
            let head = try await CacheTests.write(harness, writer, count: 5)
            let old = try await Self.history(harness)
            async let waited = harness.post(reader, SyncRequest(maxRevision: head, wait: 60, history: old), gzip: true)
            try await eventually("the reader waiting") { harness.server.waiters.count == 1 }

            try await Self.goBack(harness, to: 2)
            let renewed = try await harness.server.history.check()
            #expect(renewed != old)
            let started = ContinuousClock.now
            let (status, body) = try await waited
            #expect(ContinuousClock.now - started < .seconds(30), "answered by the renewal, not at the end of its wait")
            #expect(status == .ok)
            let answer = try JSONDecoder().decode(SyncResponse.self, from: Data(body.readableBytesView))
            #expect(answer.history == renewed, "the device sees another id than it sent and loads a new snapshot")
            #expect(answer.changeSets.isEmpty)

            async let next = harness.post(reader, SyncRequest(maxRevision: 2, wait: 60, history: renewed), gzip: true)
            try await eventually("the reader waiting at the new head") { harness.server.waiters.count == 1 }
            _ = try await harness.sync(writer, from: 2, CacheTests.notes(from: 6, count: 1))
            let (nextStatus, nextBody) = try await next
            #expect(nextStatus == .ok)
            let woken = try JSONDecoder().decode(SyncResponse.self, from: Data(nextBody.readableBytesView))
            #expect(woken.changeSets.map(\.revision) == [3], "woken by the new line's commit")
            #expect(woken.history == renewed)
        }
    }

    /// The check every interval can miss a rewind: the database may number past what the instance
    /// saw before the next read. The instance's own commits reveal it: a batch numbered at or
    /// below what it saw before.
    @Test func aBatchNumberedBelowWhatTheInstanceSawRenewsTheHistory() async throws {
        try await withTestServer(configure: { $0.redisURL = nil; $0.historyCheckInterval = .seconds(600) }) { harness in
            let writer = try await harness.register(name: "writer")
            let head = try await CacheTests.write(harness, writer, count: 5)
            let old = try await Self.history(harness)
            try await Self.goBack(harness, to: 3)
            // Past the old head before any read: a head read alone sees nothing wrong.
            _ = try await harness.sync(writer, from: 3, CacheTests.notes(from: 6, count: 4))
            #expect(try await harness.head() == head + 2)
            #expect(try await Self.history(harness) == old)
            // The watch's next tick, run now.
            let renewed = try await harness.server.history.check()
            #expect(renewed != old)
            #expect(try await Self.history(harness) == renewed)
            // And only once: the next tick finds nothing to renew.
            #expect(try await harness.server.history.check() == renewed)
        }
    }

    /// Another instance (or `revsync restored`) renewed the id: a request naming the new one is
    /// answered at once (the instance reads the id again rather than refuse it), and one naming
    /// the old one is refused from the next read on.
    @Test func anIdRenewedElsewhereIsLearned() async throws {
        try await withTestServer(configure: { $0.historyCheckInterval = .seconds(600) }) { harness in
            let device = try await harness.register()
            let head = try await CacheTests.write(harness, device, count: 2)
            let old = try await Self.history(harness)
            let (renewed, since, done) = try await PostgresHistory(database: harness.server.database).renew(from: old)
            #expect(done && renewed != old)
            #expect(since.microseconds != nil, "a renewal says when")
            // Renewing the old id again changes nothing: it is no longer the database's.
            let again = try await PostgresHistory(database: harness.server.database).renew(from: old)
            #expect(again.id == renewed && again.since == since && !again.renewed)
            let (status, _, answer) = try await Self.sync(harness, device, from: head, history: renewed)
            #expect(status == .ok)
            #expect(answer?.history == renewed)
            let (refused, error, _) = try await Self.sync(harness, device, from: head, history: old)
            #expect(refused == .conflict)
            #expect(error?.error == "history_changed")
        }
    }

    /// After a renewal every device names the old id once, nearly all at once: each request
    /// read the database before it was refused. An id this instance replaced is refused without.
    @Test func anIdThisInstanceReplacedIsRefusedWithoutAQuery() async throws {
        // No periodic reads of the history or the cache meanwhile: every lease counted is a request's.
        try await withTestServer(configure: {
            $0.historyCheckInterval = .seconds(600); $0.cacheReconcileInterval = .seconds(3600)
        }) { harness in
            let device = try await harness.register()
            let head = try await CacheTests.write(harness, device, count: 2)
            let old = try await Self.history(harness)
            #expect(try await Self.sync(harness, device, from: head, history: old).0 == .ok)
            let renewed = try await harness.server.history.renew(from: old, head: head, why: [:])
            #expect(renewed != old)
            let before = harness.server.database.leases.value
            for _ in 0..<10 {
                let (status, error, _) = try await Self.sync(harness, device, from: head, history: old)
                #expect(status == .conflict)
                #expect(error?.error == "history_changed")
            }
            // Not a read of the history per request (ten leases): the device's token may be looked
            // up again now and then, should the device watcher's first check (or its cache's
            // one-second age before the Redis subscription is up, on a loaded machine) drop it.
            let afterRefusals = harness.server.database.leases.value
            #expect(afterRefusals - before < 5)
            // An id it never held is still read for: another instance may have renewed it since.
            let (status, error, _) = try await Self.sync(harness, device, from: head, history: UUID().uuidString.lowercased())
            #expect(status == .conflict)
            #expect(error?.error == "history_changed")
            #expect(harness.server.database.leases.value > afterRefusals)
            #expect(try await Self.sync(harness, device, from: head, history: renewed).0 == .ok)
        }
    }

    /// A second restore, from a backup made before the first renewal, brings the older id back
    /// with the older line's head. The instance's renewal of the id it held finds another id in
    /// the database, which once meant "renewed elsewhere" and was adopted: devices that went
    /// offline on that older line, past the backup's head, would then have caught up over
    /// revisions the database numbers again. An older id (by when it was set) is renewed.
    @Test func anOlderIdABackupBroughtBackIsRenewedNotAdopted() async throws {
        try await withTestServer(configure: { $0.redisURL = nil; $0.historyCheckInterval = .seconds(600) }) { harness in
            let writer = try await harness.register(name: "writer")
            let stale = try await harness.register(name: "offline on the first line")
            _ = try await CacheTests.write(harness, writer, count: 3)
            let first = try await PostgresHistory(database: harness.server.database).read()
            // The backup: the first line at revision 3, its id and when it was set.
            _ = try await harness.rows("UPDATE revsync_head SET history_since = clock_timestamp() - interval '1 hour'")
            let backupSince = try await PostgresHistory(database: harness.server.database).read().since
            #expect(try await harness.server.history.check() == first.id)
            let offlineAt = try await CacheTests.write(harness, writer, count: 3, firstSeq: 4)
            _ = try await harness.sync(stale, from: 0)  // holds the first line through revision 6

            // The first restore (to revision 3) and its renewal.
            try await Self.goBack(harness, to: 3)
            let second = try await harness.server.history.check()
            #expect(second != first.id)

            // The second restore, of the same backup: the first id and head 3 again.
            try await Self.goBack(harness, to: 3)
            _ = try await harness.rows(
                "UPDATE revsync_head SET history = \(first.id)::uuid, history_since = to_timestamp(\(Double(try #require(backupSince.microseconds)) / 1e6))")
            #expect(try await PostgresHistory(database: harness.server.database).read().id == first.id)
            let third = try await harness.server.history.check()
            #expect(third != first.id, "the older id is renewed, not adopted")
            #expect(third != second)
            #expect(try await Self.history(harness) == third)
            // Only once: the next check finds the id it renewed.
            #expect(try await harness.server.history.check() == third)

            // The database numbers past the offline device's revisions again; that device, naming
            // the first id, is sent to a snapshot instead of catching up over them.
            _ = try await harness.sync(writer, from: 3, CacheTests.notes(from: 7, count: 4))
            #expect(try await harness.head() > offlineAt)
            let (status, error, _) = try await Self.sync(harness, stale, from: offlineAt, history: first.id)
            #expect(status == .conflict)
            #expect(error?.error == "history_changed")
        }
    }

    /// Instances sharing one Redis cache may each find it ahead after a restore. One that found
    /// it by reads begun before it took the first renewal's id renewed again (every device then
    /// loaded a second snapshot; a soak with three instances renewed two and three times a
    /// restore). Found before the id was taken, it renews nothing; found after, it still does.
    @Test func aCacheFoundAheadBeforeTheInstanceTookItsIdRenewsNothingMore() async throws {
        try await withTestServer(configure: { $0.redisURL = nil; $0.historyCheckInterval = .seconds(600) }) { harness in
            let found = Mutex<ContinuousClock.Instant?>(nil)
            let watch = HistoryWatch(
                history: DatasetHistory(), store: PostgresHistory(database: harness.server.database), interval: .seconds(600),
                logger: harness.server.logger, changed: { _ in }, cacheFoundRewind: { found.withLock { $0.take() } })
            let first = try await watch.check()
            let seenBefore = ContinuousClock.now
            // Another instance renews it; this one takes the new id at its next check.
            let renewed = try await PostgresHistory(database: harness.server.database).renew(from: first).id
            #expect(try await watch.check() == renewed)
            // Its reconciler's reads began before that, and tell it only now.
            found.withLock { $0 = seenBefore }
            #expect(try await watch.check() == renewed, "the renewal answered what the cache showed")
            #expect(try await Self.history(harness) == renewed)
            // Found by reads begun after it took the id: the database went back again.
            found.withLock { $0 = .now }
            let again = try await watch.check()
            #expect(again != renewed)
            #expect(try await Self.history(harness) == again)
        }
    }

    /// A batch numbered at or below what the instance saw before it started reveals a rewind,
    /// unless the instance took another id meanwhile: that renewal read the database as it is
    /// now, and the batch's numbers are of the new line. (A soak's restore was renewed twice so:
    /// a batch begun before the renewal, numbered after the restore, reported after it.)
    @Test func aBatchBegunBeforeTheInstanceTookANewIdRevealsNoRewind() {
        let history = DatasetHistory()
        let since = HistorySince(microseconds: 1)
        history.adopt(id: "old", since: since, head: 3697)
        let begun = history.mark
        history.adopt(id: "renewed", since: HistorySince(microseconds: 2), head: 3402, renewed: true)
        history.committed(first: 3403, last: 3403, before: begun)
        #expect(history.rewind == nil)
        #expect(history.highestSeen == 3403)
        // Begun under the id it holds: the same numbers below what it saw are a rewind.
        let now = history.mark
        history.committed(first: 3400, last: 3401, before: now)
        #expect(history.rewind?.first == 3400 && history.rewind?.highest == 3403)
    }

    /// The ids an instance replaced are kept, a few of them: the first read replaces none, and
    /// an id held again is no longer counted as replaced.
    @Test func theIdsAnInstanceReplacedAreKeptAFew() {
        let history = DatasetHistory()
        history.adopt(id: "first", since: HistorySince(microseconds: 1), head: 1)
        #expect(!history.replacedEarlier("first"))
        history.adopt(id: "second", since: HistorySince(microseconds: 2), head: 1, renewed: true)
        #expect(history.replacedEarlier("first") && !history.replacedEarlier("second"))
        history.adopt(id: "first", since: HistorySince(microseconds: 1), head: 1)
        #expect(!history.replacedEarlier("first") && history.replacedEarlier("second"))
        for index in 0..<DatasetHistory.replacedKept {
            history.adopt(id: "later-\(index)", since: HistorySince(microseconds: 3 + Int64(index)), head: 1, renewed: true)
        }
        #expect(!history.replacedEarlier("second"), "the oldest dropped past the bound")
        #expect(history.replacedEarlier("first") && history.replacedEarlier("later-0"))
    }

    /// A cache found ahead at start, before the first read of the id, renews it.
    @Test func aCacheFoundAheadBeforeTheFirstReadRenews() async throws {
        try await withTestServer(configure: { $0.redisURL = nil; $0.historyCheckInterval = .seconds(600) }) { harness in
            let old = try await Self.history(harness)
            let found = Mutex<ContinuousClock.Instant?>(.now)
            let watch = HistoryWatch(
                history: DatasetHistory(), store: PostgresHistory(database: harness.server.database), interval: .seconds(600),
                logger: harness.server.logger, changed: { _ in }, cacheFoundRewind: { found.withLock { $0.take() } })
            let renewed = try await watch.check()
            #expect(renewed != old)
            #expect(try await watch.check() == renewed)
        }
    }

    /// A cache ahead of PostgreSQL is a database that went back: the id is renewed with the drop.
    @Test func aCacheAheadOfPostgresRenewsTheHistory() async throws {
        try await withTestServer(configure: { $0.historyCheckInterval = .milliseconds(50) }) { harness in
            let writer = try await harness.register(name: "writer")
            let head = try await CacheTests.write(harness, writer, count: 3)
            let old = try await Self.history(harness)
            let keys = try await CacheTests.keys(harness)
            let redis = try CacheTests.redis(harness.server.settings.redisURL)
            try await redis.set(keys.head, ByteBuffer(string: String(head + 4)))
            try await eventually("the history renewed") { try await Self.history(harness) != old }
            await redis.shutdown()
        }
    }

    /// The SQLite snapshot file says whose history its records are of, and a file of the old id
    /// is never served once the id is renewed, even at the head it was built at.
    @Test func aSnapshotFileOfAnOldHistoryIsNotServed() async throws {
        try await withTestServer(configure: { $0.historyCheckInterval = .milliseconds(50) }) { harness in
            let device = try await harness.register()
            let head = try await CacheTests.write(harness, device, count: 3)
            let old = try await Self.history(harness)
            #expect(try await Self.fileMeta(harness, device).history == old)
            let renewed = try await PostgresHistory(database: harness.server.database).renew(from: old).id
            try await eventually("the instance holding the new id") { harness.server.history.history.id == renewed }
            let meta = try await Self.fileMeta(harness, device)
            #expect(meta.history == renewed)
            #expect(meta.revision == head)
        }
    }

    static func fileMeta(_ harness: TestHarness, _ device: TestDevice) async throws -> SnapshotFileMeta {
        let (status, _, body) = try await SnapshotFileTests.fetch(harness, device)
        guard status == .ok else { throw TestSetupError("GET /snapshot answered \(status)") }
        let path = try SnapshotFileTests.save(body)
        defer { try? FileManager.default.removeItem(atPath: path) }
        let tables = harness.server.schema.entities.map { SnapshotTable(name: $0.name, attributes: $0.attributes) }
        return try SnapshotFileCheck.check(path: path, tables: tables, schemaVersion: harness.server.schema.version)
    }

    @Test func theRules() throws {
        #expect(throws: Never.self) { try HistoryRules.check(claimed: nil, current: "a") }
        #expect(throws: Never.self) { try HistoryRules.check(claimed: "a", current: nil) }
        #expect(throws: Never.self) { try HistoryRules.check(claimed: "a", current: "a") }
        #expect(throws: SyncRefusal.self) { try HistoryRules.check(claimed: "a", current: "b") }
        #expect(HistoryRules.wentBack(head: 4, highestSeen: 5))
        #expect(!HistoryRules.wentBack(head: 5, highestSeen: 5))
        #expect(ErrorCode.historyChanged.status == 409)
    }
}
