import AsyncHTTPClient
import Foundation
import NIOCore
import RevsyncGzip
import RevsyncHarness
import RevsyncServer
import RevsyncWire

/// A device `lag` revisions behind catching up page by page, from servers with the page limits
/// `revsync serve` runs with. The catch-up table's servers answer any lag in one page, which no
/// deployment does; this shows whether the Redis path stays ahead at every page, not only on average.
struct PagedCatchUp {
    static let lag: Int64 = 10_000
    /// Walks per path: at least `minWalks`, so that p99 means something, then more while the budget lasts.
    static let minWalks = 20
    static let maxWalks = 200
    static let budget: Duration = .seconds(8)

    let bench: Bench
    /// The main log's reader device: these servers share its database.
    let reader: String

    /// One page of the walk, as both servers answered it.
    private struct Page {
        let after: Int64
        let changeSets: Int
        let jsonBytes: Int
        let redisGzipBytes: Int
        let postgresGzipBytes: Int
        var body: ByteBuffer { ByteBuffer(string: "{\"maxRevision\":\(after),\"changeSets\":[]}") }
    }

    func measure(http: HTTPClient) async throws -> PagedCatchUpReport {
        // As `revsync serve` would run with this environment: the defaults unless
        // REVSYNC_CATCHUP_MAX_CHANGE_SETS or REVSYNC_CATCHUP_MAX_BYTES are set.
        let limits = (try? ServerSettings.fromEnvironment())?.limits ?? ServerSettings.Limits()
        // Servers of their own, since the limits are fixed when a server is made; on the same
        // database and Redis as the bench's, so the cached one reads the keys `warm` filled
        // (same prefix, same database instance id).
        func settings(cache: Bool) throws -> ServerSettings {
            var settings = bench.settings(cache: cache, port: try FreePort.kernelChosenPort())
            settings.limits.catchUpMaxChangeSets = limits.catchUpMaxChangeSets
            settings.limits.catchUpMaxBytes = limits.catchUpMaxBytes
            return settings
        }
        let cached = try Server(settings: settings(cache: true), logger: bench.logger)
        let plain = try Server(settings: settings(cache: false), logger: bench.logger)
        // The bench's cached server has migrated the database already.
        return try await withRunning(cached.buildApplication(migrate: false)) {
            try await BenchClient(http: http, port: cached.settings.port).waitUntilHealthy()
            return try await withRunning(plain.buildApplication(migrate: false)) {
                try await BenchClient(http: http, port: plain.settings.port).waitUntilHealthy()
                let pages = try await walk(cached: cached, plain: plain)
                print("paged catch-up at lag \(Self.lag): \(pages.count) pages, walks per path for up to \(Self.budget) …")
                return try await time(pages, cached: cached, plain: plain, limits: limits)
            }
        }
    }

    private func respond(_ server: Server, _ body: ByteBuffer) async throws -> (body: ByteBuffer, gzipped: Bool) {
        try await server.sync.respond(device: try await server.device(reader), body: body, contentEncoding: nil, acceptEncoding: "gzip", logger: bench.logger)
    }

    /// The pages a device walks while `more` says so, checked to be the same JSON from both servers.
    private func walk(cached: Server, plain: Server) async throws -> [Page] {
        let head = bench.revisions
        var position = head - Self.lag
        var pages: [Page] = []
        while true {
            let after = position
            let body = ByteBuffer(string: "{\"maxRevision\":\(after),\"changeSets\":[]}")
            let viaCache = try await respond(cached, body), viaPostgres = try await respond(plain, body)
            guard viaCache.gzipped, viaPostgres.gzipped else { throw BenchError("a page after \(after) was not gzip-compressed") }
            let json = try Gzip.inflate(viaCache.body, maxSize: 1 << 30)
            guard json == (try Gzip.inflate(viaPostgres.body, maxSize: 1 << 30)) else {
                throw BenchError("the cached and uncached pages after \(after) differ")
            }
            let response = try JSONDecoder().decode(SyncResponse.self, from: Data(json.readableBytesView))
            guard response.maxRevision > after else { throw BenchError("paging stalled at \(after)") }
            pages.append(Page(
                after: after, changeSets: response.changeSets.count, jsonBytes: json.readableBytes,
                redisGzipBytes: viaCache.body.readableBytes, postgresGzipBytes: viaPostgres.body.readableBytes))
            position = response.maxRevision
            guard response.more == true else { break }
        }
        guard position == head else { throw BenchError("the paged walk ended at \(position), not at the head \(head)") }
        return pages
    }

    /// Walks the pages again and again, timing each page's request server-side as the catch-up table does.
    private func time(_ pages: [Page], cached: Server, plain: Server, limits: ServerSettings.Limits) async throws -> PagedCatchUpReport {
        let before = CacheCounters(cached)
        let clock = ContinuousClock()
        let started = clock.now
        var samples = [[[Duration]]](repeating: [[Duration]](repeating: [], count: pages.count), count: 2)
        var totals: [[Duration]] = [[], []]
        var walks = 0
        while walks < Self.maxWalks && (walks < Self.minWalks || clock.now - started < Self.budget) {
            // The paths take turns walk by walk, so that a drift of the machine touches both alike.
            for (path, server) in [cached, plain].enumerated() {
                var total = Duration.zero
                for (index, page) in pages.enumerated() {
                    let body = page.body
                    let elapsed = try await clock.measure { _ = try await respond(server, body) }
                    samples[path][index].append(elapsed)
                    total += elapsed
                }
                totals[path].append(total)
            }
            walks += 1
        }
        // The Redis path's figures stand for Redis only if no page went to PostgreSQL for a hole.
        let after = CacheCounters(cached)
        guard after == before else {
            throw BenchError("the cached server missed the cache during the paged walks (\(before) → \(after)): it was not warm")
        }
        let rows = pages.enumerated().map { index, page in
            PageRow(
                page: index + 1, after: page.after, changeSets: page.changeSets, jsonBytes: page.jsonBytes,
                redisGzipBytes: page.redisGzipBytes, postgresGzipBytes: page.postgresGzipBytes,
                redisServer: Latencies(samples[0][index]), postgresServer: Latencies(samples[1][index]))
        }
        return PagedCatchUpReport(
            lag: Int(Self.lag), maxChangeSets: limits.catchUpMaxChangeSets, maxBytes: limits.catchUpMaxBytes, walks: walks,
            pages: rows, redisWalk: Latencies(totals[0]), postgresWalk: Latencies(totals[1]))
    }
}
