import AsyncHTTPClient
import Foundation
import NIOCore
import RevsyncGzip
import RevsyncHarness
import RevsyncServer

/// The gzip bytes of catch-up answers on `TextLog`, from the Redis path (change sets compressed
/// apart, or in runs, and joined) and the PostgreSQL path (the answer compressed whole). On the
/// main log both come out tiny, which says nothing of what the joined answer costs on real text.
struct TextBytes {
    static let lags: [Int64] = [1, 10, 100, 1_000]
    let bench: Bench

    func measure(http: HTTPClient) async throws -> TextBytesReport {
        let url = try await Bench.emptyDatabase(TextLog.database, serverURL: bench.serverURL, logger: bench.logger)
        func settings(cache: Bool) throws -> ServerSettings {
            var settings = bench.settings(cache: cache, port: try FreePort.kernelChosenPort())
            settings.databaseURL = url
            // The new database's instance id already keeps its keys apart from the main log's;
            // a prefix of its own also tells them apart at a glance in Redis.
            settings.cachePrefix = "revsync-bench-text"
            return settings
        }
        let cached = try Server(settings: settings(cache: true), logger: bench.logger)
        let plain = try Server(settings: settings(cache: false), logger: bench.logger)
        let log = TextLog(entryBytes: bench.entryBytes)
        // The cached server migrates the new database before it listens; the other waits for it.
        return try await withRunning(cached.buildApplication()) {
            let client = BenchClient(http: http, port: cached.settings.port)
            try await client.waitUntilHealthy()
            return try await withRunning(plain.buildApplication(migrate: false)) {
                try await BenchClient(http: http, port: plain.settings.port).waitUntilHealthy()
                _ = try await client.register("loader", role: "admin", adminToken: Bench.adminToken)
                let reader = try await client.register("reader", role: "viewer", adminToken: Bench.adminToken)
                print("loading \(TextLog.revisions) text-like revisions of ~\(bench.entryBytes) B and warming their cache …")
                try await log.load(into: url, schema: cached.schema, logger: bench.logger)
                try await bench.warm(cached, token: reader, head: TextLog.revisions)
                return try await answers(cached: cached, plain: plain, reader: reader)
            }
        }
    }

    /// One answer per lag and path, checked to be the same JSON and, on the cached server, read from Redis alone.
    private func answers(cached: Server, plain: Server, reader: String) async throws -> TextBytesReport {
        let before = CacheCounters(cached)
        var rows: [TextBytesRow] = []
        for lag in Self.lags where lag <= TextLog.revisions {
            let body = ByteBuffer(string: "{\"maxRevision\":\(TextLog.revisions - lag),\"changeSets\":[]}")
            let viaCache = try await cached.sync.respond(
                device: try await cached.device(reader), body: body, contentEncoding: nil, acceptEncoding: "gzip", logger: bench.logger)
            let viaPostgres = try await plain.sync.respond(
                device: try await plain.device(reader), body: body, contentEncoding: nil, acceptEncoding: "gzip", logger: bench.logger)
            guard viaCache.gzipped, viaPostgres.gzipped else { throw BenchError("a text-log answer at lag \(lag) was not gzip-compressed") }
            let json = try Gzip.inflate(viaCache.body, maxSize: 1 << 30)
            guard json == (try Gzip.inflate(viaPostgres.body, maxSize: 1 << 30)) else {
                throw BenchError("the cached and uncached text-log answers differ at lag \(lag)")
            }
            rows.append(TextBytesRow(
                lag: Int(lag), jsonBytes: json.readableBytes,
                redisGzipBytes: viaCache.body.readableBytes, postgresGzipBytes: viaPostgres.body.readableBytes))
        }
        let after = CacheCounters(cached)
        guard after == before else { throw BenchError("the text log's cached answers were not all read from Redis (\(before) → \(after))") }
        return TextBytesReport(revisions: TextLog.revisions, entryBytes: bench.entryBytes, rows: rows)
    }
}
