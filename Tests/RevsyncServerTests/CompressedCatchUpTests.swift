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

/// Gzip answers assembled from change sets compressed at commit (`GzipAssembler`,
/// `CatchUpScript`) hold exactly the JSON of the plain answer, from Redis and from PostgreSQL.
@Suite struct CompressedCatchUpTests {
    /// One catch-up's JSON: inflated (and checked as one whole gzip member) when asked for with gzip.
    static func json(_ client: any TestClientProtocol, _ device: TestDevice, from revision: Int64, gzip: Bool) async throws -> String {
        var headers: HTTPFields = [.authorization: "Bearer \(device.token)"]
        if gzip { headers[.acceptEncoding] = "gzip" }
        return try await client.execute(
            uri: "/sync", method: .post, headers: headers, body: ByteBuffer(string: "{\"maxRevision\":\(revision),\"changeSets\":[]}")
        ) { response in
            guard response.status == .ok else { throw TestSetupError("catch-up answered \(response.status)") }
            #expect((response.headers[.contentEncoding] == "gzip") == gzip)
            return String(buffer: gzip ? try Gzip.inflate(response.body, maxSize: 1 << 28) : response.body)
        }
    }

    /// The same server with its cache off, on the same database.
    static func withPostgresOnly<T: Sendable>(_ harness: TestHarness, _ body: @Sendable (any TestClientProtocol) async throws -> T) async throws -> T {
        var plain = harness.server.settings
        plain.redisURL = nil
        return try await Server(settings: plain, logger: CacheTests.quiet).buildApplication(migrate: false).test(.router) { try await body($0) }
    }

    @Test func gzipAnswersHoldThePlainJSONAtLagsOneToAThousandInBothForms() async throws {
        // It knocks keys out of Redis: this instance's own copy of its commits (`RecentValues`) would hide that.
        try await withTestServer(configure: { $0.cacheMemoryRevisions = 0 }) { harness in
            let writer = try await harness.register("member", name: "writer")
            let reader = try await harness.register("viewer", name: "reader")
            let head = try await CacheTests.write(harness, writer, count: 1_000, perRequest: 100)
            let keys = try await CacheTests.keys(harness)
            let redis = try CacheTests.redis(harness.server.settings.redisURL)
            // Both forms were compressed at commit.
            #expect(try await redis.get(keys.deflated(head)) != nil)
            #expect(try await redis.get(keys.authorDeflated(1)) != nil)
            // Runs compressed together: every aligned run of 32 and of 8 up to the head.
            #expect(try await redis.get(keys.run(32, 0)) != nil)
            #expect(try await redis.get(keys.run(8, head / 8 - 1)) != nil)
            let lags = Set(Array(stride(from: 1, through: 1_000, by: 7)) + [2, 3, 999, 1_000])
            try await Self.withPostgresOnly(harness) { postgres in
                for lag in lags.sorted() {
                    // Halfway, some runs go missing: their change sets go one by one.
                    if lag > 500 && lag < 510 { _ = try await redis.del([keys.run(32, 5), keys.run(8, 50), keys.run(8, 100)]) }
                    let from = head - Int64(lag)
                    // The writer gets its own change sets in the author's form, the reader in the public one.
                    for device in [reader, writer] {
                        let plain = try await Self.json(harness.client, device, from: from, gzip: false)
                        #expect(try await Self.json(harness.client, device, from: from, gzip: true) == plain, "lag \(lag), \(device.id)")
                        #expect(try await Self.json(postgres, device, from: from, gzip: false) == plain, "lag \(lag), \(device.id)")
                        #expect(try await Self.json(postgres, device, from: from, gzip: true) == plain, "lag \(lag), \(device.id)")
                    }
                }
            }
            await redis.shutdown()
            let sample = try await Self.json(harness.client, writer, from: head - 2, gzip: true)
            #expect(sample.contains("\"seq\":999") && sample.contains("\"seq\":1000"), "the author's form carries its seqs")
        }
    }

    @Test func anEntryLargerThanTheByteLimitIsSentAloneOnEveryPath() async throws {
        try await withTestServer(configure: { $0.limits.catchUpMaxBytes = 2_000 }) { harness in
            let writer = try await harness.register("member", name: "writer")
            let reader = try await harness.register("viewer", name: "reader")
            let small = { (seq: Int64) in
                changeSet(seq: seq, ("notes", EntityChanges(create: [-seq], attributes: [-seq: ["body": .string("small \(seq)"), "pinned": false]])))
            }
            let huge = changeSet(seq: 4, ("notes", EntityChanges(create: [-4], attributes: [-4: ["body": .string(String(repeating: "h", count: 9_000)), "pinned": false]])))
            _ = try await harness.sync(writer, from: 0, [small(1), small(2), small(3), huge, small(5), small(6)])
            try await Self.withPostgresOnly(harness) { postgres in
                for (client, path) in [(harness.client, "redis"), (postgres, "postgres")] as [(any TestClientProtocol, String)] {
                    for gzip in [false, true] {
                        var pages: [[Int64]] = []
                        var position: Int64 = 0
                        var more = true
                        while more {
                            let json = try await Self.json(client, reader, from: position, gzip: gzip)
                            let page = try JSONDecoder().decode(SyncResponse.self, from: Data(json.utf8))
                            pages.append(page.changeSets.compactMap(\.revision))
                            position = page.maxRevision
                            more = page.more == true
                        }
                        #expect(pages == [[1, 2, 3], [4], [5, 6]], "\(path), gzip \(gzip)")
                    }
                }
            }
        }
    }

    @Test func flushAndRestartMidRunStillGiveThePostgresAnswers() async throws {
        let ownRedis = try await ThrowawayRedisServer.start()
        defer { ownRedis.kill() }
        let url = "redis://127.0.0.1:\(ownRedis.port)"
        try await withTestServer(configure: { $0.redisURL = url }) { harness in
            let writer = try await harness.register("member", name: "writer")
            let reader = try await harness.register("viewer", name: "reader")
            let control = try CacheTests.redis(url)
            let total: Int64 = 60
            try await Self.withPostgresOnly(harness) { postgres in
                try await withThrowingTaskGroup(of: Void.self) { group in
                    group.addTask {
                        try await CacheTests.writeThroughFlushAndRestart(harness, writer, total: total, redis: ownRedis, control: control)
                    }
                    group.addTask {
                        var compared = 0
                        let deadline = ContinuousClock.now + .seconds(60)
                        while compared < 150 && ContinuousClock.now < deadline {
                            let from = Int64.random(in: 0...max(0, try await harness.head()))
                            for device in [reader, writer] {
                                // The cache first: PostgreSQL's answer, read after it, holds at least as much.
                                let cached = try await Self.json(harness.client, device, from: from, gzip: true)
                                let direct = try await Self.json(postgres, device, from: from, gzip: false)
                                #expect(Self.isPrefix(cached, of: direct), "from \(from): \(cached.prefix(200)) against \(direct.prefix(200))")
                                compared += 1
                            }
                        }
                    }
                    try await group.waitForAll()
                }
            }
            await control.shutdown()
        }
    }

    /// Whether the change sets of answer `a` are, byte for byte, the first change sets of answer `b`.
    static func isPrefix(_ a: String, of b: String) -> Bool {
        guard let aEnd = a.range(of: "],\"maxRevision\":"), let bEnd = b.range(of: "],\"maxRevision\":") else { return false }
        let (first, second) = (a[..<aEnd.lowerBound], b[..<bEnd.lowerBound])
        return first == second || second.hasPrefix(first + ",") || first == "{\"changeSets\":["
    }
}
