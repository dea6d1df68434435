import Foundation
import Hummingbird
import HummingbirdTesting
import Logging
import NIOCore
import RevsyncRedis
import RevsyncRules
import RevsyncWire
import RevsyncTestSupport
import Testing
@testable import RevsyncServer

/// Catch-up from Redis: correct whatever happens to the cache, and free of PostgreSQL when warm.
@Suite struct CacheTests {
    static let quiet = Logger(label: "revsync.tests.cache", factory: { _ in SwiftLogNoOpLogHandler() })

    static func notes(from seq: Int64, count: Int) -> [ChangeSet] {
        (0..<Int64(count)).map { offset in
            let seq = seq + offset
            return changeSet(seq: seq, ("notes", EntityChanges(create: [-seq], attributes: [-seq: ["body": .string("note \(seq) " + String(repeating: "·", count: 50)), "pinned": false]])))
        }
    }

    /// Writes `count` change sets of `device`, `perRequest` at a time; returns the head.
    static func write(_ harness: TestHarness, _ device: TestDevice, count: Int, perRequest: Int = 10, firstSeq: Int64 = 1) async throws -> Int64 {
        var seq = firstSeq
        while seq < firstSeq + Int64(count) {
            let batch = min(perRequest, Int(firstSeq + Int64(count) - seq))
            _ = try await harness.sync(device, from: try await harness.head(), notes(from: seq, count: batch))
            seq += Int64(batch)
        }
        return try await harness.head()
    }

    static func keys(_ harness: TestHarness) async throws -> CacheKeys {
        let instance = try await PostgresChangeLog(database: harness.server.database).instance()
        return CacheKeys(prefix: harness.server.settings.cachePrefix, instance: instance)
    }

    static func redis(_ url: String?) throws -> RedisClient {
        var configuration = try RedisConfiguration(url: url ?? "redis://127.0.0.1:63799")
        configuration.connectTimeout = RedisConfiguration.testConnectTimeout
        return try RedisClient(configuration: configuration, logger: quiet)
    }

    /// Redis calls that failed so far (`revsync_cache_errors_total`).
    static func cacheErrors(_ server: Server) -> Int { cacheCount(server, "errors") }

    /// `revsync_cache_<event>_total` so far.
    static func cacheCount(_ server: Server, _ event: String) -> Int {
        let line = server.metrics.exposition().split(separator: "\n").first { $0.hasPrefix("revsync_cache_\(event)_total ") }
        return line.flatMap { $0.split(separator: " ").last }.flatMap { Double($0) }.map { Int($0) } ?? 0
    }

    /// The raw answer to a catch-up request.
    static func catchUp(_ client: any TestClientProtocol, _ device: TestDevice, from revision: Int64) async throws -> ByteBuffer {
        try await client.execute(
            uri: "/sync", method: .post, headers: [.authorization: "Bearer \(device.token)"],
            body: ByteBuffer(string: "{\"maxRevision\":\(revision),\"changeSets\":[]}")
        ) { response in
            guard response.status == .ok else { throw TestSetupError("catch-up answered \(response.status): \(String(buffer: response.body))") }
            return response.body
        }
    }

    @Test func warmCatchUpMakesNoPostgresQuery() async throws {
        // Cached devices are trusted for a second after each read of the device-change counter
        // (every 500 ms): on a loaded machine a read can come back late, the reader's token is
        // then looked up in PostgreSQL, and the round counted that lease as catch-up's (all
        // three rounds did, once in about ten runs of the whole suite, with no Redis error). A
        // check every hour trusts them for an hour and a half; revocation has tests of its own.
        try await withTestServer(configure: {
            $0.cacheReconcileInterval = .seconds(3600)
            $0.historyCheckInterval = .seconds(3600)
            $0.deviceCheckInterval = .seconds(3600)
        }) { harness in
            let writer = try await harness.register("member", name: "writer")
            let reader = try await harness.register("viewer", name: "reader")
            let head = try await Self.write(harness, writer, count: 30)
            _ = try await harness.sync(reader, from: head)  // authenticates once
            // Leases are counted for the whole instance: a Redis call that failed (a commit's
            // cache write, or a read timed out, which the whole suite's first minute has made
            // happen) sends catch-up to PostgreSQL, as it should, and the instance's own first
            // reads (its history id, at start) run when the loaded machine lets them. A round
            // that leased a connection is run again; one of three must lease none.
            for round in 1...3 {
                let before = harness.server.database.leases.value
                for lag: Int64 in [1, 5, 10, 29, 30, 0] {
                    let page = try await harness.sync(reader, from: head - lag)
                    #expect(page.changeSets.compactMap(\.revision) == Array(stride(from: head - lag + 1, through: head, by: 1)))
                }
                let leased = harness.server.database.leases.value - before
                if leased == 0 { break }
                #expect(
                    round < 3,
                    "catch-up leased PostgreSQL connections in every round (\(leased) in the last; Redis calls failed: \(Self.cacheErrors(harness.server)))")
            }
            let metrics = harness.server.metrics.exposition()
            #expect(metrics.contains("revsync_catchup_duration_seconds_count{source=\"redis\"}"))
        }
    }

    @Test func holesAreRefilledAndAnswersAreByteIdenticalToPostgresOnly() async throws {
        try await withTestServer(configure: {
            $0.limits.catchUpMaxChangeSets = 50
            // It knocks keys out of Redis: this instance's own copy of its commits (`RecentValues`) would hide that.
            $0.cacheMemoryRevisions = 0
        }) { harness in
            let writer = try await harness.register("member", name: "writer")
            let reader = try await harness.register("viewer", name: "reader")
            let head = try await Self.write(harness, writer, count: 120, perRequest: 20)
            let keys = try await Self.keys(harness)
            var plain = harness.server.settings
            plain.redisURL = nil
            let postgresOnly = try Server(settings: plain, logger: Self.quiet)
            let redis = try Self.redis(harness.server.settings.redisURL)
            try await postgresOnly.buildApplication(migrate: false).test(.router) { plainClient in
                try await withThrowingTaskGroup(of: Void.self) { group in
                    group.addTask {
                        // Knock random holes in the cache while readers read.
                        for _ in 0..<40 {
                            let victims = (0..<5).flatMap { _ in keys.all(Int64.random(in: 1...head)) }
                            _ = try await redis.del(victims)
                            try await Task.sleep(for: .milliseconds(2))
                        }
                    }
                    for _ in 0..<3 {
                        group.addTask {
                            for _ in 0..<25 {
                                let from = Int64.random(in: 0...head)
                                for device in [reader, writer] {
                                    let cached = try await Self.catchUp(harness.client, device, from: from)
                                    let direct = try await Self.catchUp(plainClient, device, from: from)
                                    #expect(cached == direct, "from \(from): the cache's answer differs from PostgreSQL's")
                                }
                            }
                        }
                    }
                    try await group.waitForAll()
                }
            }
            // Reading everything once in plain JSON refills every hole (a gzip read takes the runs instead).
            var position: Int64 = 0
            while position < head {
                let (_, body) = try await harness.post(reader, SyncRequest(maxRevision: position, changeSets: []), gzip: false)
                position = try JSONDecoder().decode(SyncResponse.self, from: Data(body.readableBytesView)).maxRevision
            }
            let cached = try await redis.mget((1...head).map(keys.entry))
            #expect(cached.allSatisfy { $0 != nil })
            await redis.shutdown()
            #expect(harness.server.metrics.exposition().contains("revsync_cache_backfills_total"))
        }
    }

    /// `total` notes, one a request; Redis is flushed after the 20th and restarted after the 40th.
    static func writeThroughFlushAndRestart(
        _ harness: TestHarness, _ writer: TestDevice, total: Int64, redis: ThrowawayRedisServer, control: RedisClient
    ) async throws {
        for seq in 1...total {
            _ = try await harness.sync(writer, from: 0, notes(from: seq, count: 1))
            if seq == 20 { try await control.flushAll() }
            if seq == 40 {
                redis.kill()
                try await Task.sleep(for: .milliseconds(50))
                try await redis.start()
            }
        }
    }

    @Test func flushAllAndRedisRestartMidRunKeepEveryAnswerCorrect() async throws {
        let ownRedis = try await ThrowawayRedisServer.start()
        defer { ownRedis.kill() }
        let url = "redis://127.0.0.1:\(ownRedis.port)"
        try await withTestServer(configure: { $0.redisURL = url }) { harness in
            let writer = try await harness.register("member", name: "writer")
            let reader = try await harness.register("viewer", name: "reader")
            let control = try Self.redis(url)
            let total: Int64 = 60
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await Self.writeThroughFlushAndRestart(harness, writer, total: total, redis: ownRedis, control: control) }
                group.addTask {
                    var position: Int64 = 0
                    // Only against a reader that never catches up: under the whole suite's load on a
                    // slower machine, 60 s once left it at 56 of 60 (alone it takes a few seconds).
                    let deadline = ContinuousClock.now + .seconds(240)
                    while position < total && ContinuousClock.now < deadline {
                        let page = try await harness.sync(reader, from: position)
                        let revisions = page.changeSets.compactMap(\.revision)
                        #expect(revisions == Array(stride(from: position + 1, through: position + Int64(revisions.count), by: 1)))
                        #expect(page.maxRevision >= position)
                        position = page.maxRevision
                    }
                    #expect(position == total)
                }
                try await group.waitForAll()
            }
            await control.shutdown()
        }
    }

    @Test func redisStoppedServesFromPostgresAndReturnsToTheCache() async throws {
        let ownRedis = try await ThrowawayRedisServer.start()
        defer { ownRedis.kill() }
        try await withTestServer(configure: { $0.redisURL = "redis://127.0.0.1:\(ownRedis.port)" }) { harness in
            let writer = try await harness.register("member", name: "writer")
            let reader = try await harness.register("viewer", name: "reader")
            let head = try await Self.write(harness, writer, count: 10)
            ownRedis.kill()
            let page = try await harness.sync(reader, from: 0)
            #expect(page.changeSets.compactMap(\.revision) == Array(1...head))
            _ = try await harness.sync(writer, from: head, Self.notes(from: 11, count: 1))
            #expect(try await harness.raw("/ready", method: .get, token: nil).0 == .ok)
            #expect(harness.server.metrics.exposition().contains("revsync_cache_up 0"))

            try await ownRedis.start()
            var back = false
            for _ in 0..<40 where !back {
                try await Task.sleep(for: .milliseconds(100))
                let page = try await harness.sync(reader, from: 0)
                #expect(page.changeSets.compactMap(\.revision) == Array(1...(head + 1)))
                back = harness.server.metrics.exposition().contains("revsync_cache_up 1")
            }
            #expect(back, "the server did not return to the cache")
        }
    }

    /// The reconciler raises a cached head and horizon behind PostgreSQL's (a write lost, a key
    /// evicted or flushed), though its reads skip the raise while the cache is level.
    @Test func theReconcilerRaisesALaggingHeadAndAMissingHorizon() async throws {
        try await withTestServer(configure: { $0.cacheReconcileInterval = .milliseconds(100) }) { harness in
            let writer = try await harness.register("member", name: "writer")
            let head = try await Self.write(harness, writer, count: 5)
            let keys = try await Self.keys(harness)
            let redis = try Self.redis(harness.server.settings.redisURL)
            try await redis.set(keys.head, ByteBuffer(string: "3"))
            _ = try await redis.command(["DEL", keys.horizon])
            try await eventually("the cached head and horizon raised to PostgreSQL's") {
                let values = try await redis.mget([keys.head, keys.horizon]).map { $0.map { String(buffer: $0) } }
                return values == [String(head), "0"]
            }
            await redis.shutdown()
        }
    }

    @Test func cachedHeadMovedBackwardsNeverLosesAChangeSet() async throws {
        try await withTestServer(configure: { $0.cacheReconcileInterval = .milliseconds(200) }) { harness in
            let writer = try await harness.register("member", name: "writer")
            let reader = try await harness.register("viewer", name: "reader")
            let head = try await Self.write(harness, writer, count: 10)
            let keys = try await Self.keys(harness)
            let redis = try Self.redis(harness.server.settings.redisURL)
            // As if Redis were restored from an old snapshot.
            try await redis.set(keys.head, ByteBuffer(string: "3"))
            let ahead = try await harness.sync(reader, from: 8)
            #expect(ahead.changeSets.compactMap(\.revision) == [9, 10])
            var position: Int64 = 0
            let deadline = ContinuousClock.now + .seconds(10)
            while position < head && ContinuousClock.now < deadline {
                let page = try await harness.sync(reader, from: position)
                let revisions = page.changeSets.compactMap(\.revision)
                #expect(revisions == Array(stride(from: position + 1, through: position + Int64(revisions.count), by: 1)))
                #expect(page.maxRevision >= position)
                position = page.maxRevision
                if revisions.isEmpty { try await Task.sleep(for: .milliseconds(50)) }
            }
            #expect(position == head)
            await redis.shutdown()
        }
    }

    @Test func rejectedChangeSetNeverAppearsInRedis() async throws {
        try await withTestServer { harness in
            let writer = try await harness.register("member", name: "writer")
            let head = try await Self.write(harness, writer, count: 1)
            let keys = try await Self.keys(harness)
            let redis = try Self.redis(harness.server.settings.redisURL)
            let rejected = try await harness.sync(writer, from: head, [changeSet(seq: 2, ("notes", EntityChanges(create: [-2], attributes: [-2: ["body": 5, "pinned": false]])))])
            #expect(rejected.corrective.count == 1)
            #expect(try await redis.get(keys.entry(head + 1)) == nil)
            #expect(try await redis.get(keys.head) == ByteBuffer(string: String(head)))
            _ = try await harness.sync(writer, from: head, Self.notes(from: 3, count: 1))
            // The answer does not wait for the cache's write (docs/protocol.md): it lands a round trip later.
            try await eventually("the accepted change set cached", within: .seconds(5)) { try await redis.get(keys.entry(head + 1)) != nil }
            await redis.shutdown()
        }
    }

    /// A writing request is answered before Redis has its batch (docs/protocol.md); a device
    /// asking the same instance right after must get that commit all the same, not wait for
    /// its next sync. Redis is paused for writes (`CLIENT PAUSE … WRITE`: reads go on), so the
    /// batch's cache write waits in Redis while the second device asks for the whole log.
    ///
    /// With the instance's copy of its commits (`RecentValues`) holding the whole read, it
    /// comes from there; holding only the latest two revisions, the rest comes from Redis
    /// and the commit from the copy, with no read of PostgreSQL, in a gzip answer (chained
    /// pieces) and in plain JSON. (With no copy at all, the writer's own answer reads its
    /// commit from PostgreSQL and waits for writing it back to Redis: nothing to show here.)
    @Test(arguments: [(1024, true), (2, true), (2, false)] as [(Int64, Bool)])
    func aCommitIsServedByItsInstanceBeforeTheCacheHasIt(memoryRevisions: Int64, gzip: Bool) async throws {
        let ownRedis = try await ThrowawayRedisServer.start()
        defer { ownRedis.kill() }
        let url = "redis://127.0.0.1:\(ownRedis.port)"
        // Neither periodic read may raise the cached head from PostgreSQL meanwhile. The paused
        // write must not time out either (its failure would send reads to PostgreSQL, which has
        // the commit anyway): the pause is ended by hand, long before either limit.
        try await withTestServer(configure: {
            $0.redisURL = url
            $0.redisCommandTimeout = .seconds(60)
            $0.cacheReconcileInterval = .seconds(3600)
            $0.historyCheckInterval = .seconds(3600)
            $0.cacheMemoryRevisions = memoryRevisions
        }) { harness in
            let writer = try await harness.register("member", name: "writer")
            let reader = try await harness.register("viewer", name: "reader")
            // One a request: each its own batch, so that the copy keeps only the latest.
            let head = try await Self.write(harness, writer, count: 3, perRequest: 1)
            _ = try await harness.sync(reader, from: head)  // authenticates once
            let keys = try await Self.keys(harness)
            let control = try Self.redis(url)
            // The earlier commits' cache writes must be over before the pause: a batch is answered
            // only after the one before it was published (`PublicationTurn`), so the writer would
            // wait out the pause behind a held write of revision 3. (Its reply is counted just
            // before its turn ends, well before the next commit's leader looks.)
            try await eventually("the earlier commits cached", within: .seconds(10)) {
                let cached = try await control.get(keys.head).map { String(buffer: $0) }
                return Self.cacheCount(harness.server, "writes") >= Int(head) && cached == String(head)
            }
            // Long enough for both requests on a loaded machine (in the whole suite here the
            // reader's has taken 2 s); the reader's reads go on connections with nothing
            // outstanding, not behind the paused write (`ConnectionPool`).
            _ = try await control.command(["CLIENT", "PAUSE", "30000", "WRITE"])
            let paused = ContinuousClock.now
            let written = try await harness.sync(writer, from: head, Self.notes(from: 4, count: 1))
            let revision = written.maxRevision
            #expect(revision == head + 1)
            let (misses, errors) = (Self.cacheCount(harness.server, "misses"), Self.cacheErrors(harness.server))
            let asked = ContinuousClock.now
            let (status, body) = try await harness.post(reader, SyncRequest(maxRevision: 0, changeSets: []), gzip: gzip)
            let answered = ContinuousClock.now
            let missed = Self.cacheCount(harness.server, "misses") - misses
            let cachedHead = try await control.get(keys.head).map { String(buffer: $0) }
            _ = try await control.command(["CLIENT", "UNPAUSE"])
            #expect(status == .ok, "\(String(buffer: body))")
            // Redis still lacked the commit once the answer was out, and no Redis call failed.
            #expect(cachedHead == String(head), "Redis had head \(cachedHead ?? "none") when the reader was answered (the writer took \(asked - paused), the reader \(answered - asked))")
            #expect(Self.cacheErrors(harness.server) == errors)
            let page = try JSONDecoder().decode(SyncResponse.self, from: Data(body.readableBytesView))
            #expect(page.changeSets.compactMap(\.revision) == Array(1...revision), "the reader was answered \(page.changeSets.compactMap(\.revision)) while Redis lacked \(revision)")
            #expect(page.maxRevision == revision)
            #expect(missed == 0, "\(missed) revisions read from PostgreSQL")
            try await eventually("the commit cached", within: .seconds(5)) {
                try await control.get(keys.head).map { String(buffer: $0) } == String(revision)
            }
            await control.shutdown()
        }
    }
}

@Suite struct BackfillCoordinatorTests {
    @Test func concurrentMissesOfTheSameRevisionsReadOnce() async throws {
        let coordinator = BackfillCoordinator()
        let reads = ReadCounter()
        let results = try await withThrowingTaskGroup(of: Int.self) { group in
            for _ in 0..<10 {
                group.addTask {
                    let range = BackfillCoordinator.Range(first: 5, last: 7, limits: CatchUpLimits(maxChangeSets: 10, maxBytes: 1_000))
                    return try await coordinator.load(range) {
                        await reads.increment()
                        try await Task.sleep(for: .milliseconds(200))
                        return [5, 6, 7].map { CachedEntry(CommittedEntry(revision: $0, deviceId: 1, body: ByteBuffer(), authorBody: ByteBuffer())) }
                    }.count
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(results == Array(repeating: 3, count: 10))
        #expect(await reads.value == 1)
    }

    actor ReadCounter {
        var value = 0
        func increment() { value += 1 }
    }
}
