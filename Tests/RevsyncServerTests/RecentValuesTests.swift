import Foundation
import Hummingbird
import HummingbirdTesting
import NIOCore
import RevsyncGzip
import RevsyncRedis
import RevsyncWire
import Testing
@testable import RevsyncServer

/// This instance's own copy of its latest commits' cache values (`RecentValues`).
@Suite struct RecentValuesTests {
    static func set(_ revision: Int64, _ value: String) -> CacheValue {
        CacheValue(slot: .entry(revision), value: ByteBuffer(string: value))
    }

    @Test func holdsTheSetValuesOfABatchAndAnswersOnlyWhole() {
        let recent = RecentValues(capacity: 10)
        recent.store([Self.set(1, "1"), Self.set(2, "2")], newest: 2)
        #expect(recent.values([.entry(2), .entry(1)])?.map { $0.map { String(buffer: $0) } } == ["2", "1"])
        // Another form of a revision it holds is another value.
        #expect(recent.values([.author(1)]) == nil)
        // One it does not hold: the read goes to Redis for all of them.
        #expect(recent.values([.entry(1), .entry(3)]) == nil)
        #expect(recent.values([]) == nil)
        #expect(recent.count == 2)
    }

    @Test func forgetsBatchesThatFallOutOfTheWindow() {
        let recent = RecentValues(capacity: 3)
        for revision in Int64(1)...5 { recent.store([Self.set(revision, "\(revision)")], newest: revision) }
        // Newest 5 and a window of 3: revisions 3, 4 and 5 are kept.
        #expect(recent.values([.entry(2)]) == nil)
        #expect(recent.values([.entry(3), .entry(4), .entry(5)]) != nil)
        // A batch of several revisions goes as a whole, by its newest.
        recent.store([Self.set(6, "6"), Self.set(7, "7"), Self.set(8, "8")], newest: 8)
        #expect(recent.values([.entry(5)]) == nil)
        #expect(recent.values([.entry(6), .entry(7), .entry(8)]) != nil)
        #expect(recent.count == 3)
        // Many more batches than the window: what is kept stays bounded.
        for revision in Int64(9)...500 { recent.store([Self.set(revision, "\(revision)")], newest: revision) }
        #expect(recent.count == 3)
        #expect(recent.values([.entry(498), .entry(499), .entry(500)]) != nil)
    }

    /// What goes to Redis is named as before: each slot by its own key, none by another's.
    @Test func eachSlotIsNamedByItsRedisKey() {
        let keys = CacheKeys(prefix: "revsync", instance: "abc")
        let slots: [CacheSlot] = [
            .entry(7), .author(7), .deflated(7), .authorDeflated(7), .chained(7), .run(size: 16, index: 3), .chainedRun(size: 16, index: 3),
        ]
        #expect(slots.map(keys.key) == keys.all(7) + [keys.run(16, 3), keys.chainedRun(16, 3)])
    }

    @Test func noCapacityHoldsNothingAndRemoveAllForgetsEverything() {
        let off = RecentValues(capacity: 0)
        off.store([Self.set(1, "1")], newest: 1)
        #expect(off.values([.entry(1)]) == nil)
        let recent = RecentValues(capacity: 100)
        recent.store([Self.set(1, "1")], newest: 1)
        recent.removeAll()
        #expect(recent.values([.entry(1)]) == nil)
        #expect(recent.count == 0)
    }

    /// Every cache value but the head and the horizon (which are not values of a revision).
    static func dropValues(_ redis: RedisClient, _ keys: CacheKeys) async throws {
        var cursor = "0"
        repeat {
            let reply = try await redis.command(["SCAN", cursor, "MATCH", keys.prefix + ":*", "COUNT", "10000"])
            guard let parts = reply.arrayValue, parts.count == 2, let next = parts[0].stringValue else { break }
            cursor = next
            let found = (parts[1].arrayValue ?? []).compactMap(\.stringValue).filter { $0 != keys.head && $0 != keys.horizon }
            if !found.isEmpty { _ = try await redis.del(found) }
        } while cursor != "0"
    }

    /// A writer far behind gets every other change set with its acknowledgement. With the copy,
    /// that answer needs neither Redis's values nor PostgreSQL; without it (capacity 0) the
    /// same answer is read back from PostgreSQL, which shows the values really were gone.
    @Test(arguments: [Int64(1024), 0])
    func aWritersAnswerComesFromThisInstancesCopyOfItsCommits(memory: Int64) async throws {
        try await withTestServer(configure: {
            $0.cacheReconcileInterval = .seconds(3600)
            $0.cacheMemoryRevisions = memory
        }) { harness in
            let alice = try await harness.register("member", name: "alice")
            let bob = try await harness.register("member", name: "bob")
            let head = try await CacheTests.write(harness, alice, count: 12, perRequest: 1)
            let keys = try await CacheTests.keys(harness)
            let redis = try CacheTests.redis(harness.server.settings.redisURL)
            try await Self.dropValues(redis, keys)
            await redis.shutdown()

            // Far behind, in a gzip answer (deflated forms and runs); then at the head, in plain JSON.
            var answers: [ByteBuffer] = []
            for (seq, from, gzip) in [(Int64(1), Int64(0), true), (2, head + 1, false)] {
                let (status, body) = try await harness.post(bob, SyncRequest(maxRevision: from, changeSets: CacheTests.notes(from: seq, count: 1)), gzip: gzip)
                #expect(status == .ok, "\(String(buffer: body))")
                answers.append(body)
            }
            let written = answers
            let metrics = harness.server.metrics.exposition()
            if memory > 0 {
                #expect(metrics.contains("revsync_cache_memory_reads_total"))
                #expect(!metrics.contains("revsync_cache_backfills_total"), "a write's answer read PostgreSQL")
            } else {
                #expect(!metrics.contains("revsync_cache_memory_reads_total"))
                #expect(metrics.contains("revsync_cache_backfills_total"))
            }
            // The same change sets as a server without a cache on the same database (Bob's own in his form).
            var plain = harness.server.settings
            plain.redisURL = nil
            let postgresOnly = try Server(settings: plain, logger: CacheTests.quiet)
            try await postgresOnly.buildApplication(migrate: false).test(.router) { plainClient in
                let direct = try JSONDecoder().decode(SyncResponse.self, from: Data(try await CompressedCatchUpTests.json(plainClient, bob, from: 0, gzip: false).utf8))
                #expect(direct.changeSets.compactMap(\.revision) == Array(1...(head + 2)))
                let first = try JSONDecoder().decode(SyncResponse.self, from: Data(written[0].readableBytesView))
                #expect(first.maxRevision == head + 1)
                #expect(first.changeSets == Array(direct.changeSets.prefix(Int(head + 1))))
                // At the head the answer is Bob's own change set alone: the very bytes PostgreSQL's path gives.
                #expect(String(buffer: written[1]) == (try await CompressedCatchUpTests.json(plainClient, bob, from: head + 1, gzip: false)))
            }
        }
    }
}
