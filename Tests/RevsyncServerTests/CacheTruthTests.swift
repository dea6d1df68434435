import Foundation
import NIOCore
import RevsyncRedis
import RevsyncTestSupport
import RevsyncWire
import Testing
@testable import RevsyncServer

/// The cache can never stay ahead of PostgreSQL at runtime, and never serves another database.
@Suite struct CacheTruthTests {
    static func waitFor(_ condition: @Sendable () async throws -> Bool) async throws -> Bool {
        let started = ContinuousClock.now
        while ContinuousClock.now - started < .seconds(30) {
            if try await condition() { return true }
            try await Task.sleep(for: .milliseconds(50))
        }
        return false
    }

    @Test func cacheAheadOfPostgresIsDroppedAndPhantomsAreNeverServed() async throws {
        try await withTestServer { harness in
            let writer = try await harness.register("member", name: "writer")
            let reader = try await harness.register("viewer", name: "reader")
            let head = try await CacheTests.write(harness, writer, count: 5)
            let keys = try await CacheTests.keys(harness)
            let redis = try CacheTests.redis(harness.server.settings.redisURL)
            // What a restored database leaves behind: a cache with revisions PostgreSQL never had.
            for revision in (head + 1)...(head + 4) {
                let phantom = CommittedEntry(
                    revision: revision, deviceId: 424_242, body: ByteBuffer(string: #"{"phantom":true}"#), authorBody: ByteBuffer(string: "{}"))
                _ = try await redis.pipeline(CachedEntry(phantom).setCommands(keys: keys))
            }
            try await redis.set(keys.head, ByteBuffer(string: String(head + 4)))
            #expect(try await Self.waitFor { try await redis.get(keys.head) == ByteBuffer(string: String(head)) })
            #expect(try await redis.get(keys.entry(head + 1)) == nil)
            let page = try await harness.sync(reader, from: head)
            #expect(page.changeSets.isEmpty)
            #expect(page.maxRevision == head)
            // The next real commit takes head + 1 and is what readers get. Its answer does not
            // wait for the cache's write (docs/protocol.md), so a read at once may still find the
            // cached head at `head`: the first answer that brings anything must bring it.
            _ = try await harness.sync(writer, from: head, CacheTests.notes(from: 6, count: 1))
            var next = try await harness.sync(reader, from: head)
            for _ in 0..<100 where next.changeSets.isEmpty {
                try await Task.sleep(for: .milliseconds(20))
                next = try await harness.sync(reader, from: head)
            }
            #expect(next.changeSets.map(\.revision) == [head + 1])
            #expect(!next.changeSets.contains { $0.entities.isEmpty })
            await redis.shutdown()
        }
    }

    @Test func cachedEntryThatDiffersFromPostgresIsDropped() async throws {
        try await withTestServer { harness in
            let writer = try await harness.register("member", name: "writer")
            let reader = try await harness.register("viewer", name: "reader")
            let head = try await CacheTests.write(harness, writer, count: 3)
            let keys = try await CacheTests.keys(harness)
            let redis = try CacheTests.redis(harness.server.settings.redisURL)
            let impostor = CommittedEntry(revision: head, deviceId: 424_242, body: ByteBuffer(string: #"{"impostor":true}"#), authorBody: ByteBuffer(string: "{}"))
            let forged = CachedEntry(impostor)
            _ = try await redis.pipeline(forged.setCommands(keys: keys))
            // Every form of it, plain and compressed, must go (the drop deletes key by key).
            let forgedValues = forged.setCommands(keys: keys).map { $0[2] }
            #expect(try await Self.waitFor {
                let values = try await redis.mget(keys.all(head))
                return zip(values, forgedValues).allSatisfy { $0 == nil || $0 != $1 }
            })
            let page = try await harness.sync(reader, from: head - 1)
            #expect(page.changeSets.first?.entities["notes"] != nil)
            await redis.shutdown()
        }
    }

    @Test func copiedDatabaseGetsItsOwnCacheKeys() async throws {
        try await withTestServer { harness in
            try await TestDatabase.withNew { copy in
                let original = try await harness.rows("SELECT instance::text FROM revsync_head").first?.decode(String.self) ?? ""
                try await harness.withSecondInstance(configure: { $0.databaseURL = copy }) { other in
                    // A dump and restore copies the stored instance uuid.
                    _ = try await other.rows("UPDATE revsync_head SET instance = \(original)::uuid")
                    let first = try await PostgresChangeLog(database: harness.server.database).instance()
                    let second = try await PostgresChangeLog(database: other.server.database).instance()
                    #expect(first.hasPrefix(original))
                    #expect(second.hasPrefix(original))
                    #expect(first != second)
                }
            }
        }
    }
}
