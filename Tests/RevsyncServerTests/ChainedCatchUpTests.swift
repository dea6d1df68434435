import Foundation
import Hummingbird
import HummingbirdTesting
import NIOCore
import RevsyncGzip
import RevsyncRedis
import RevsyncTestSupport
import RevsyncWire
import Testing
@testable import RevsyncServer

/// Pieces compressed after the change set before them (`ChainedFragment`): gzip answers
/// that use them are smaller and hold exactly the plain JSON, and a piece is never sent
/// after bytes it was not made for.
@Suite struct ChainedCatchUpTests {
    /// The raw gzip answer to a catch-up from `revision`.
    static func gzipAnswer(_ client: any TestClientProtocol, _ device: TestDevice, from revision: Int64) async throws -> ByteBuffer {
        try await client.execute(
            uri: "/sync", method: .post, headers: [.authorization: "Bearer \(device.token)", .acceptEncoding: "gzip"],
            body: ByteBuffer(string: "{\"maxRevision\":\(revision),\"changeSets\":[]}")
        ) { response in
            guard response.status == .ok, response.headers[.contentEncoding] == "gzip" else { throw TestSetupError("catch-up answered \(response.status)") }
            return response.body
        }
    }

    /// The cache's misses and backfills so far (entries read from PostgreSQL for holes).
    static func cacheMisses(_ server: Server) -> [String] {
        server.metrics.exposition().split(separator: "\n").map(String.init)
            .filter { $0.hasPrefix("revsync_cache_misses_total ") || $0.hasPrefix("revsync_cache_backfills_total ") }.sorted()
    }

    /// Every key of the chained forms (`pcb:` and `rcb…:`).
    static func chainedKeys(_ redis: RedisClient, _ keys: CacheKeys) async throws -> [String] {
        var found: [String] = []
        for pattern in [":pcb:*", ":rcb*"] {
            var cursor = "0"
            repeat {
                let reply = try await redis.command(["SCAN", cursor, "MATCH", keys.prefix + pattern, "COUNT", "10000"])
                guard let parts = reply.arrayValue, parts.count == 2, let next = parts[0].stringValue else { break }
                cursor = next
                found += (parts[1].arrayValue ?? []).compactMap(\.stringValue)
            } while cursor != "0"
        }
        return found
    }

    @Test func chainedPiecesShrinkGzipAnswersAndHoldThePlainJSONWithTwoWritersTakingTurns() async throws {
        // It knocks keys out of Redis: this instance's own copy of its commits (`RecentValues`) would hide that.
        try await withTestServer(configure: { $0.cacheMemoryRevisions = 0 }) { harness in
            let alice = try await harness.register("member", name: "alice")
            let bob = try await harness.register("member", name: "bob")
            let reader = try await harness.register("viewer", name: "reader")
            // Turns of 3 and 2 change sets, so that runs and singles hold both writers' and chains cross authors.
            var seqs: [String: Int64] = [alice.id: 1, bob.id: 1]
            while try await harness.head() < 150 {
                for (device, count) in [(alice, 3), (bob, 2)] {
                    _ = try await harness.sync(device, from: try await harness.head(), CacheTests.notes(from: seqs[device.id]!, count: count))
                    seqs[device.id]! += Int64(count)
                }
            }
            let head = try await harness.head()
            let keys = try await CacheTests.keys(harness)
            let redis = try CacheTests.redis(harness.server.settings.redisURL)
            // Made at commit: every revision after the first, and every run after the first of its size.
            #expect(try await redis.get(keys.chained(head)) != nil)
            #expect(try await redis.get(keys.chained(2)) != nil)
            #expect(try await redis.get(keys.chained(1)) == nil)
            #expect(try await redis.get(keys.chainedRun(8, 1)) != nil)
            #expect(try await redis.get(keys.chainedRun(32, 1)) != nil)
            #expect(try await redis.get(keys.chainedRun(32, 0)) == nil)
            let lags: [Int64] = [1, 2, 3, 5, 9, 17, 40, 64, 100, head - 1, head]
            var chainedSizes: [Int64: Int] = [:]
            for lag in lags {
                // Alice and Bob get their own change sets in the author's form: every chain through them breaks.
                for device in [reader, alice, bob] {
                    let plain = try await CompressedCatchUpTests.json(harness.client, device, from: head - lag, gzip: false)
                    #expect(try await CompressedCatchUpTests.json(harness.client, device, from: head - lag, gzip: true) == plain, "lag \(lag), \(device.id)")
                }
                chainedSizes[lag] = try await Self.gzipAnswer(harness.client, reader, from: head - lag).readableBytes
            }
            let chained = try await Self.chainedKeys(redis, keys)
            #expect(chained.count > 150)
            _ = try await redis.del(chained)
            for lag in lags {
                let plain = try await CompressedCatchUpTests.json(harness.client, reader, from: head - lag, gzip: false)
                #expect(try await CompressedCatchUpTests.json(harness.client, reader, from: head - lag, gzip: true) == plain, "lag \(lag) alone")
                let alone = try await Self.gzipAnswer(harness.client, reader, from: head - lag).readableBytes
                // Lag 1 has nothing to chain; from two change sets on, every piece but the first is chained.
                if lag == 1 { #expect(alone == chainedSizes[lag]) } else { #expect(alone > chainedSizes[lag]!, "lag \(lag): \(alone) against \(chainedSizes[lag]!) chained") }
            }
            await redis.shutdown()
        }
    }

    @Test func aChainedPieceMadeAfterOtherBytesIsSentAloneInstead() async throws {
        // It knocks keys out of Redis: this instance's own copy of its commits (`RecentValues`) would hide that.
        try await withTestServer(configure: { $0.cacheMemoryRevisions = 0 }) { harness in
            let writer = try await harness.register("member", name: "writer")
            let reader = try await harness.register("viewer", name: "reader")
            for seq in Int64(1)...20 { _ = try await harness.sync(writer, from: try await harness.head(), CacheTests.notes(from: seq, count: 1)) }
            let keys = try await CacheTests.keys(harness)
            let redis = try CacheTests.redis(harness.server.settings.redisURL)
            let twelve = try #require(try await redis.get(keys.entry(12)).flatMap(CachedEntry.decodePublic))
            // As a cache written by another history might hold it: revision 12 compressed after other bytes than 11's.
            let impostor = ChainedFragment(twelve.body, after: ByteBuffer(string: "{\"revision\":11,\"other\":true}"), tail: DeflateFragment.crc(of: twelve.body))
            _ = try await redis.pipeline([[ByteBuffer(string: "SET"), ByteBuffer(string: keys.chained(12)), impostor.value(prefix: CachedEntry.devicePrefix(twelve.device))]])
            #expect(try await redis.get(keys.chained(12)).flatMap(CachedEntry.decodeChained)?.chained.link == impostor.link)
            // From 10: 11 goes alone, 12 would be chained after it.
            for from in [Int64(10), 9, 0] {
                let plain = try await CompressedCatchUpTests.json(harness.client, reader, from: from, gzip: false)
                #expect(try await CompressedCatchUpTests.json(harness.client, reader, from: from, gzip: true) == plain, "from \(from)")
            }
            await redis.shutdown()
        }
    }

    /// Pages of 13 change sets end between pieces; pages of 1,000 bytes (about nine notes) end
    /// inside runs, where the run goes one change set at a time.
    @Test(arguments: [(13, 4 << 20), (1_000, 1_000)])
    func missingChainedPiecesGoAloneWithoutAskingPostgres(maxChangeSets: Int, maxBytes: Int) async throws {
        try await withTestServer(configure: {
            $0.cacheReconcileInterval = .seconds(3600)
            $0.limits.catchUpMaxChangeSets = maxChangeSets
            $0.limits.catchUpMaxBytes = maxBytes
            // It knocks keys out of Redis: this instance's own copy of its commits (`RecentValues`) would hide that.
            $0.cacheMemoryRevisions = 0
        }) { harness in
            let writer = try await harness.register("member", name: "writer")
            let reader = try await harness.register("viewer", name: "reader")
            for seq in Int64(1)...40 { _ = try await harness.sync(writer, from: try await harness.head(), CacheTests.notes(from: seq, count: 1)) }
            let keys = try await CacheTests.keys(harness)
            let redis = try CacheTests.redis(harness.server.settings.redisURL)
            // As after a restart or a backfill: some change sets and a run never had their chained form.
            _ = try await redis.del((12...30).map { keys.chained($0) } + [keys.chainedRun(8, 2)])
            var plains: [Int64: String] = [:]
            for from in Int64(0)..<40 { plains[from] = try await CompressedCatchUpTests.json(harness.client, reader, from: from, gzip: false) }
            // Counted by the cache's own counters, not by connection leases: the server writes
            // devices' last_seen_at every 30 s, which a slow run of this test may cross.
            let before = Self.cacheMisses(harness.server)
            for from in Int64(0)..<40 {
                #expect(try await CompressedCatchUpTests.json(harness.client, reader, from: from, gzip: true) == plains[from], "from \(from)")
            }
            #expect(Self.cacheMisses(harness.server) == before, "a missing chained piece was read from PostgreSQL")
            await redis.shutdown()
        }
    }

    /// A batch that completes a run takes the revision before it, by another device, as the
    /// chained run's dictionary: that device must still be named among the run's authors.
    @Test func aRunCompletedByALaterBatchNamesTheAuthorOfTheRevisionBeforeThatBatch() async throws {
        try await withTestServer { harness in
            let alice = try await harness.register("member", name: "alice")
            let carol = try await harness.register("member", name: "carol")
            let bob = try await harness.register("member", name: "bob")
            for seq in Int64(1)...6 { _ = try await harness.sync(alice, from: try await harness.head(), CacheTests.notes(from: seq, count: 1)) }
            _ = try await harness.sync(carol, from: try await harness.head(), CacheTests.notes(from: 1, count: 1))
            // Revisions 8 … 10 in one batch, which completes the run 1 … 8; 7 is Carol's only change set in it.
            _ = try await harness.sync(bob, from: try await harness.head(), CacheTests.notes(from: 1, count: 3))
            #expect(try await harness.head() == 10)
            for device in [carol, alice, bob] {
                let plain = try await CompressedCatchUpTests.json(harness.client, device, from: 0, gzip: false)
                #expect(try await CompressedCatchUpTests.json(harness.client, device, from: 0, gzip: true) == plain, "\(device.id)")
            }
        }
    }

    /// A fragment holding a stored block (zlib stores what it cannot shrink, and the commit
    /// falls back to storing when zlib fails) must start on a byte of the answer: a stored
    /// block's padding counts from the start of the fragment it was made in. JSON rarely
    /// makes zlib store a block, so every third change set's fragment is replaced by a
    /// stored one, its chained piece and the runs dropped, and answers at many lags must
    /// hold the plain JSON with those fragments after pieces that end inside a byte.
    @Test func fragmentsHoldingAStoredBlockAreJoinedOnAByteAndHoldThePlainJSON() async throws {
        // It knocks keys out of Redis: this instance's own copy of its commits (`RecentValues`) would hide that.
        try await withTestServer(configure: { $0.cacheMemoryRevisions = 0 }) { harness in
            let writer = try await harness.register("member", name: "writer")
            let reader = try await harness.register("viewer", name: "reader")
            let head = try await CacheTests.write(harness, writer, count: 60, perRequest: 7)
            let keys = try await CacheTests.keys(harness)
            let redis = try CacheTests.redis(harness.server.settings.redisURL)
            var inside = 0
            for revision in 1...head {
                let value = try #require(try await redis.get(keys.deflated(revision)))
                guard case .some((let author, .deflated(let fragment))) = CachedEntry.decode(value, form: .deflated) else {
                    throw TestSetupError("pzb:\(revision) does not decode")
                }
                #expect(!fragment.startsOnByte, "zlib stored a block of revision \(revision)'s JSON")
                if fragment.lastBits < 8 { inside += 1 }
                guard revision % 3 == 0 else { continue }
                let body = try #require(try await redis.get(keys.entry(revision)).flatMap(CachedEntry.decodePublic)).body
                let stored = DeflateFragment(storing: body)
                #expect(stored.startsOnByte)
                try await redis.set(keys.deflated(revision), CachedEntry.deflatedValue(author, stored))
                _ = try await redis.del([keys.chained(revision)])
            }
            // Most fragments end inside a byte, so the stored ones follow pieces that do.
            #expect(inside > Int(head) / 2, "\(inside) of \(head) end inside a byte")
            var runs: [String] = []
            for size in CachedRun.sizes { for index in 0...(head / size) { runs += [keys.run(size, index), keys.chainedRun(size, index)] } }
            _ = try await redis.del(runs)
            for lag in [1, 2, 3, 4, 5, 7, 9, 16, 33, head] as [Int64] {
                for device in [reader, writer] {
                    let plain = try await CompressedCatchUpTests.json(harness.client, device, from: head - lag, gzip: false)
                    #expect(try await CompressedCatchUpTests.json(harness.client, device, from: head - lag, gzip: true) == plain, "lag \(lag), \(device.id)")
                }
            }
            await redis.shutdown()
        }
    }
}
