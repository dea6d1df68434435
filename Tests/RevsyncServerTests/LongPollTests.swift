import Foundation
import NIOCore
import RevsyncRedis
import RevsyncTestSupport
import RevsyncWire
import ServiceLifecycle
import Testing
@testable import RevsyncServer

/// `POST /sync` with `wait`: held until a commit (on any instance) passes `maxRevision`, the
/// wait ends, the client leaves or the server shuts down.
@Suite(.timeLimit(.minutes(2))) struct LongPollTests {
    /// A sync request without change sets that may wait `seconds`.
    static func waiting(_ harness: TestHarness, _ device: TestDevice, from maxRevision: Int64, seconds: Double) async throws -> SyncResponse {
        let (status, body) = try await harness.post(device, SyncRequest(maxRevision: maxRevision, wait: seconds), gzip: true)
        guard status == .ok else { throw TestSetupError("waiting sync answered \(status): \(String(buffer: body))") }
        return try JSONDecoder().decode(SyncResponse.self, from: Data(body.readableBytesView))
    }

    @Test func aCommitOnAnotherInstanceAnswersAWaiter() async throws {
        // No re-check within the test, nor a head read by the cache's reconciler: the wake-up
        // comes through Redis.
        try await withTestServer(configure: { $0.waitRecheckInterval = .seconds(600); $0.cacheReconcileInterval = .seconds(600) }) { first in
            let writer = try await first.register("member", name: "writer")
            let reader = try await first.register("viewer", name: "reader")
            try await first.withSecondInstance { second in
                try await eventually("the second instance subscribed") { second.server.commitFeed.isSubscribed }
                let waiting = Task { try await Self.waiting(second, reader, from: 0, seconds: 60) }
                try await eventually("the reader waiting") { second.server.waiters.count == 1 }
                let ack = try await first.sync(writer, from: 0, CacheTests.notes(from: 1, count: 1))
                let answer = try await waiting.value
                #expect(answer.committed.compactMap(\.revision) == [1])
                #expect(answer.maxRevision == 1)
                // The reader gets the public form: no seq, no temporary ids.
                #expect(answer.committed.first?.seq == nil)
                #expect(ack.committed.first?.seq == 1)
                #expect(second.server.metrics.exposition().contains(#"revsync_sync_wakeups_total{reason="committed"} 1"#))
            }
        }
    }

    @Test func oneCommitAnswersEveryWaiterWithTheSameChangeSets() async throws {
        try await withTestServer { harness in
            let writer = try await harness.register("member", name: "writer")
            var readers: [TestDevice] = []
            for index in 0..<8 { readers.append(try await harness.register("viewer", name: "reader\(index)")) }
            let waiting = readers.map { reader in Task { try await Self.waiting(harness, reader, from: 0, seconds: 60) } }
            try await eventually("every reader waiting") { harness.server.waiters.count == readers.count }
            _ = try await harness.sync(writer, from: 0, CacheTests.notes(from: 1, count: 3))
            for task in waiting {
                let answer = try await task.value
                #expect(answer.committed.compactMap(\.revision) == [1, 2, 3])
                #expect(answer.committed.allSatisfy { $0.seq == nil })
            }
        }
    }

    /// A commit of whole aligned runs (8 change sets) is read once for every waiter, in gzip
    /// as runs: each waiter gets them in the public form, the first time alone and the second
    /// time chained after the revision before.
    @Test func aCommitOfWholeRunsAnswersEveryWaiterInThePublicForm() async throws {
        try await withTestServer { harness in
            let writer = try await harness.register("member", name: "writer")
            var readers: [TestDevice] = []
            for index in 0..<3 { readers.append(try await harness.register("viewer", name: "reader\(index)")) }
            for round in Int64(0)..<2 {
                let waiting = readers.map { reader in Task { try await Self.waiting(harness, reader, from: 8 * round, seconds: 60) } }
                try await eventually("every reader waiting") { harness.server.waiters.count == readers.count }
                _ = try await harness.sync(writer, from: 8 * round, CacheTests.notes(from: 8 * round + 1, count: 8))
                for task in waiting {
                    let answer = try await task.value
                    #expect(answer.committed.compactMap(\.revision) == Array((8 * round + 1)...(8 * round + 8)), "round \(round)")
                    #expect(answer.committed.allSatisfy { $0.seq == nil }, "round \(round): the public form")
                }
            }
        }
    }

    @Test func aWaiterGetsItsOwnChangeSetsInTheAuthorForm() async throws {
        try await withTestServer { harness in
            let device = try await harness.register("member", name: "both")
            let waiting = Task { try await Self.waiting(harness, device, from: 0, seconds: 60) }
            try await eventually("the device waiting") { harness.server.waiters.count == 1 }
            _ = try await harness.sync(device, from: 0, CacheTests.notes(from: 1, count: 1))
            let answer = try await waiting.value
            #expect(answer.committed.map(\.seq) == [1])
        }
    }

    @Test func aDeviceRevokedWhileItWaitsGetsNothingCommittedMeanwhile() async throws {
        try await withTestServer { harness in
            let writer = try await harness.register("member", name: "writer")
            let phone = try await harness.register("viewer", name: "lost phone")
            let waiting = Task { try await harness.post(phone, SyncRequest(maxRevision: 0, wait: 60), gzip: true) }
            try await eventually("the phone waiting") { harness.server.waiters.count == 1 }
            #expect(try await harness.raw("/devices/\(phone.id)", method: .delete, token: adminToken).0 == .noContent)
            _ = try await harness.sync(writer, from: 0, CacheTests.notes(from: 1, count: 1))
            let (status, body) = try await waiting.value
            #expect(status == .unauthorized)
            #expect(!String(buffer: body).contains("note 1"))
        }
    }

    @Test func theEndOfTheWaitAnswersEmpty() async throws {
        try await withTestServer { harness in
            let writer = try await harness.register("member", name: "writer")
            let reader = try await harness.register("viewer", name: "reader")
            _ = try await harness.sync(writer, from: 0, CacheTests.notes(from: 1, count: 2))
            let started = ContinuousClock.now
            let answer = try await Self.waiting(harness, reader, from: 2, seconds: 1)
            #expect(ContinuousClock.now - started >= .milliseconds(900))
            #expect(answer.changeSets.isEmpty)
            #expect(answer.maxRevision == 2)
            #expect(harness.server.metrics.exposition().contains(#"revsync_sync_wakeups_total{reason="timed_out"} 1"#))
        }
    }

    @Test func aDeviceBehindIsAnsweredAtOnce() async throws {
        try await withTestServer { harness in
            let writer = try await harness.register("member", name: "writer")
            let reader = try await harness.register("viewer", name: "reader")
            _ = try await harness.sync(writer, from: 0, CacheTests.notes(from: 1, count: 2))
            let answer = try await Self.waiting(harness, reader, from: 0, seconds: 60)
            #expect(answer.committed.compactMap(\.revision) == [1, 2])
            #expect(!harness.server.metrics.exposition().contains("revsync_sync_wakeups_total"))
        }
    }

    @Test func aRequestWithChangeSetsNeverWaits() async throws {
        try await withTestServer { harness in
            let writer = try await harness.register("member", name: "writer")
            var request = SyncRequest(maxRevision: 0, changeSets: CacheTests.notes(from: 1, count: 1))
            request.wait = 60
            let (status, body) = try await harness.post(writer, request, gzip: true)
            #expect(status == .ok)
            let answer = try JSONDecoder().decode(SyncResponse.self, from: Data(body.readableBytesView))
            #expect(answer.committed.map(\.seq) == [1])
            #expect(!harness.server.metrics.exposition().contains("revsync_sync_wakeups_total"))
        }
    }

    @Test func aWaitLongerThanTheMaximumIsCutToIt() async throws {
        try await withTestServer(configure: { $0.maxWait = .seconds(1) }) { harness in
            let reader = try await harness.register("viewer", name: "reader")
            let answer = try await Self.waiting(harness, reader, from: 0, seconds: 3600)
            #expect(answer.changeSets.isEmpty)
            #expect(harness.server.metrics.exposition().contains(#"revsync_sync_wakeups_total{reason="timed_out"} 1"#))
        }
    }

    @Test(arguments: [#""wait":-1"#, #""wait":"soon""#, #""wait":true"#, #""wait":null"#])
    func aWaitThatIsNotZeroOrMoreSecondsIsRefused(_ field: String) async throws {
        try await withTestServer { harness in
            let reader = try await harness.register("viewer", name: "reader")
            let (status, body) = try await harness.raw(
                "/sync", token: reader.token, body: ByteBuffer(string: #"{"maxRevision":0,"changeSets":[],"# + field + "}"))
            if field.hasSuffix("null") {
                // null is the same as leaving it out: answered at once.
                #expect(status == .ok)
            } else {
                #expect(status == .badRequest)
                #expect(try harness.error(body).error == "invalid_request")
            }
        }
    }

    @Test func afterFlushAllAndARedisRestartWaitersAreStillWoken() async throws {
        let ownRedis = try await ThrowawayRedisServer.start()
        defer { ownRedis.kill() }
        let url = "redis://127.0.0.1:\(ownRedis.port)"
        try await withTestServer(configure: { $0.redisURL = url; $0.waitRecheckInterval = .milliseconds(200) }) { first in
            let writer = try await first.register("member", name: "writer")
            let reader = try await first.register("viewer", name: "reader")
            try await first.withSecondInstance { second in
                // FLUSHALL while the reader waits on the second instance: the commit still reaches it.
                try await eventually("the second instance subscribed") { second.server.commitFeed.isSubscribed }
                var waiting = Task { try await Self.waiting(second, reader, from: 0, seconds: 60) }
                try await eventually("the reader waiting") { second.server.waiters.count == 1 }
                try await RedisClient.withClient(configuration: ownRedis.configuration) { try await $0.flushAll() }
                _ = try await first.sync(writer, from: 0, CacheTests.notes(from: 1, count: 1))
                #expect(try await waiting.value.committed.compactMap(\.revision) == [1])

                // Redis gone while it waits: no message can be published; PostgreSQL's head wakes it.
                waiting = Task { try await Self.waiting(second, reader, from: 1, seconds: 60) }
                try await eventually("the reader waiting") { second.server.waiters.count == 1 }
                ownRedis.kill()
                _ = try await first.sync(writer, from: 1, CacheTests.notes(from: 2, count: 1))
                #expect(try await waiting.value.committed.compactMap(\.revision) == [2])

                // Redis back (empty, as after a restart): the subscription comes back and wakes it.
                try await ownRedis.start()
                try await eventually("the subscription back") { second.server.commitFeed.isSubscribed }
                waiting = Task { try await Self.waiting(second, reader, from: 2, seconds: 60) }
                try await eventually("the reader waiting") { second.server.waiters.count == 1 }
                _ = try await first.sync(writer, from: 2, CacheTests.notes(from: 3, count: 1))
                #expect(try await waiting.value.committed.compactMap(\.revision) == [3])
            }
        }
    }

    /// The cache's reconciler reads PostgreSQL's head every interval anyway: that read wakes
    /// the waiters, and the re-check does not read it again. The writer here has no Redis, so
    /// nothing is published, and the waiting instance's re-check is 600 s away.
    @Test func theCacheReconcilersHeadReadWakesAWaiter() async throws {
        try await withTestServer(configure: { $0.redisURL = nil }) { first in
            let writer = try await first.register("member", name: "writer")
            let reader = try await first.register("viewer", name: "reader")
            let reconciling: (inout ServerSettings) -> Void = {
                $0.redisURL = ServerSettings.forTests(databaseURL: $0.databaseURL).redisURL
                $0.waitRecheckInterval = .seconds(600)
                $0.cacheReconcileInterval = .milliseconds(200)
            }
            try await first.withSecondInstance(configure: reconciling) { second in
                let waiting = Task { try await Self.waiting(second, reader, from: 0, seconds: 20) }
                try await eventually("the reader waiting") { second.server.waiters.count == 1 }
                _ = try await first.sync(writer, from: 0, CacheTests.notes(from: 1, count: 1))
                #expect(try await waiting.value.committed.compactMap(\.revision) == [1])
            }
        }
    }

    @Test func withRedisOffAnotherInstancesCommitStillWakesAWaiter() async throws {
        try await withTestServer(configure: { $0.redisURL = nil; $0.waitRecheckInterval = .milliseconds(200) }) { first in
            let writer = try await first.register("member", name: "writer")
            let reader = try await first.register("viewer", name: "reader")
            try await first.withSecondInstance { second in
                let waiting = Task { try await Self.waiting(second, reader, from: 0, seconds: 60) }
                try await eventually("the reader waiting") { second.server.waiters.count == 1 }
                _ = try await first.sync(writer, from: 0, CacheTests.notes(from: 1, count: 1))
                #expect(try await waiting.value.committed.compactMap(\.revision) == [1])
            }
        }
    }
}
