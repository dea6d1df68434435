import AsyncHTTPClient
import CompressNIO
import Foundation
import Hummingbird
import Logging
import NIOCore
import PostgresNIO
import RevsyncGzip
import RevsyncHarness
import RevsyncRedis
import RevsyncRules
import RevsyncServer
import RevsyncWire

/// One benchmark run: a fresh database with a synthetic log, the same server with and
/// without its Redis cache, and the raw Redis floor, measured side by side.
struct Bench {
    let serverURL: String
    let benchURL: String
    let redisURL: String
    let revisions: Int64
    let entryBytes: Int
    let logger: Logger
    static let adminToken = "bench-admin-token"
    /// Concurrency levels of the write measurement: devices, each with its own connection and seq.
    static let writeDevices = [1, 8, 32, 128]
    /// Change sets per commit of the SQL-only floor: 1 is one commit per change set.
    static let floorBatches = [1, 32, 128]

    /// What one run measures: `--writes-only` and `--catch-up-only` each leave the other half out.
    enum Parts {
        case all, catchUp, writes
        var catchUp: Bool { self != .writes }
        var writes: Bool { self != .catchUp }
    }

    init(databaseURL: String, redisURL: String, revisions: Int64, entryBytes: Int, logger: Logger) async throws {
        serverURL = databaseURL
        benchURL = try await Self.freshDatabase(serverURL: databaseURL, redisURL: redisURL, logger: logger)
        self.redisURL = redisURL
        self.revisions = revisions
        self.entryBytes = entryBytes
        self.logger = logger
    }

    /// Drops and creates the database `revsync_bench` on the server of `serverURL`, and flushes
    /// Redis: every run starts with no log, no devices and no cache. Returns the new database's URL.
    static func freshDatabase(serverURL: String, redisURL: String, logger: Logger) async throws -> String {
        let url = try await emptyDatabase("revsync_bench", serverURL: serverURL, logger: logger)
        let redis = try RedisClient(configuration: try RedisConfiguration(url: redisURL), logger: logger)
        try await redis.flushAll()
        await redis.shutdown()
        return url
    }

    /// Drops and creates the database `name` on the server of `serverURL`; returns its URL.
    /// `name` is the bench's own constant, never user input, so it is written into the SQL.
    static func emptyDatabase(_ name: String, serverURL: String, logger: Logger) async throws -> String {
        guard var components = URLComponents(string: serverURL) else { throw SettingsError("bad database URL \(serverURL)") }
        components.path = "/" + name
        try await SQL.run(on: serverURL, "DROP DATABASE IF EXISTS \(name) WITH (FORCE)", logger: logger)
        try await SQL.run(on: serverURL, "CREATE DATABASE \(name)", logger: logger)
        return components.string ?? serverURL
    }

    func settings(cache: Bool, port: Int) -> ServerSettings {
        var settings = ServerSettings()
        settings.databaseURL = benchURL
        settings.adminToken = Self.adminToken
        settings.port = port
        settings.redisURL = cache ? redisURL : nil
        settings.cacheWindow = revisions + 10_000
        settings.cacheMaxBytes = 4 << 30
        // One response per catch-up, however large the lag, so each lag is one request.
        settings.limits.catchUpMaxChangeSets = 20_000
        settings.limits.catchUpMaxBytes = 256 << 20
        settings.databaseConnections = 40
        // Every wrk connection of part (d) is the one reader device: the per-device limit (4 by
        // default) would answer the rest 503, which measures the guard, not catch-up.
        settings.maxRequestsPerDevice = ConcurrentLoad.connections.max() ?? 1
        // Group commit, the cache's memory and the request workers as the server would run them
        // with the same environment, so settings can be compared.
        if let environment = try? ServerSettings.fromEnvironment() {
            settings.requestWorkers = environment.requestWorkers
            settings.commitBatchSize = environment.commitBatchSize
            settings.commitBatchWait = environment.commitBatchWait
            settings.cacheMemoryRevisions = environment.cacheMemoryRevisions
        }
        return settings
    }

    /// - Parameter loadSeconds: seconds of each wrk run of part (d); 0 skips it.
    func run(parts: Parts, writeSeconds: Int, loadSeconds: Int) async throws -> BenchReport {
        // Before the log is loaded, which takes minutes at 100,000 revisions.
        let wrk = parts.catchUp && loadSeconds > 0 ? try Wrk.locate() : nil
        // The writes by wrk need it too, but only they: without it their table is left out, and said so.
        let wrkWriter = parts.writes ? try? Wrk.locate() : nil
        if parts.writes && wrkWriter == nil { print("wrk is not on the PATH: the writes by wrk are left out (apt-get install wrk; Scripts/bench does)") }
        let durability = try await SQL.durability(on: benchURL, logger: logger)
        let cachedPort = try FreePort.kernelChosenPort(), plainPort = try FreePort.kernelChosenPort()
        let cached = try Server(settings: settings(cache: true, port: cachedPort), logger: logger)
        let plain = try Server(settings: settings(cache: false, port: plainPort), logger: logger)
        var clientConfiguration = HTTPClient.Configuration()
        clientConfiguration.decompression = .disabled
        // A connection for every writing device: the pool keeps 8 per host by default, and the devices
        // beyond them would queue inside the bench for a connection, not at the server.
        clientConfiguration.connectionPool.concurrentHTTP1ConnectionsPerHostSoftLimit = Self.writeDevices.max() ?? 1
        let http = HTTPClient(eventLoopGroupProvider: .singleton, configuration: clientConfiguration)
        let redis = try RedisClient(configuration: try RedisConfiguration(url: redisURL), logger: logger)
        let cachedApp = cached.buildApplication(), plainApp = plain.buildApplication(migrate: false)
        let (catchUp, paged, textBytes, load, writes, wrkWrites) = try await withRunning(cachedApp) {
            try await BenchClient(http: http, port: cachedPort).waitUntilHealthy()
            return try await withRunning(plainApp) {
                try await BenchClient(http: http, port: plainPort).waitUntilHealthy()
                var catchUp: [CatchUpRow] = [], load: LoadReport?, writes: [WriteRow] = [], wrkWrites: [WriteRow] = []
                var paged: PagedCatchUpReport?, textBytes: TextBytesReport?
                if parts.catchUp {
                    let reader = try await prepareLog(cached: cached, client: BenchClient(http: http, port: cachedPort))
                    catchUp = try await measureCatchUp(cached: cached, plain: plain, http: http, ports: (cachedPort, plainPort), redis: redis, reader: reader)
                    if revisions >= PagedCatchUp.lag {
                        paged = try await PagedCatchUp(bench: self, reader: reader).measure(http: http)
                    }
                    textBytes = try await TextBytes(bench: self).measure(http: http)
                    if let wrk {
                        // Before the writes, which would move the head the load's requests are counted from.
                        let concurrent = ConcurrentLoad(
                            wrk: wrk, http: http, ports: (cachedPort, plainPort), reader: reader, head: revisions, seconds: loadSeconds)
                        load = try await concurrent.measure()
                    }
                }
                if parts.writes {
                    writes = try await measureWrites(seconds: writeSeconds, client: BenchClient(http: http, port: cachedPort))
                    if let wrkWriter {
                        wrkWrites = try await measureWrites(by: wrkWriter, seconds: writeSeconds, client: BenchClient(http: http, port: cachedPort))
                    }
                }
                return (catchUp, paged, textBytes, load, writes, wrkWrites)
            }
        }
        await redis.shutdown()
        try await http.shutdown()
        var floor: [FloorRow] = []
        if parts.writes {
            // Once the servers have stopped, so that only PostgreSQL shares the cores with the floor.
            floor = try await WriteFloor(url: benchURL, schema: cached.schema, logger: logger)
                .measure(perCommit: Self.floorBatches, seconds: writeSeconds)
        }
        return BenchReport(
            machine: Machine.describe(), date: ISO8601DateFormatter().string(from: Date()),
            revisions: parts.catchUp ? revisions : 0, entryBytes: entryBytes, durability: durability,
            catchUp: catchUp, pagedCatchUp: paged, textBytes: textBytes, load: load, writes: writes, wrkWrites: wrkWrites, floor: floor, push: nil)
    }

    /// Registers the loader and the reader, loads the log and warms the cache; returns the reader's token.
    private func prepareLog(cached: Server, client: BenchClient) async throws -> String {
        let loader = try await client.register("loader", role: "admin", adminToken: Self.adminToken)
        let reader = try await client.register("reader", role: "viewer", adminToken: Self.adminToken)
        print("loading \(revisions) revisions of ~\(entryBytes) B …")
        try await loadLog(loaderToken: loader, cached: cached)
        print("warming the cache …")
        try await warm(cached, token: reader)
        return reader
    }

    /// Measures the three catch-up paths at each lag, once the log is loaded and the cache warm.
    private func measureCatchUp(
        cached: Server, plain: Server, http: HTTPClient, ports: (Int, Int), redis: RedisClient, reader: String
    ) async throws -> [CatchUpRow] {
        let client = BenchClient(http: http, port: ports.0), plainClient = BenchClient(http: http, port: ports.1)
        let instance = try await PostgresChangeLog(database: cached.database).instance()

        var rows: [CatchUpRow] = []
        for lag: Int64 in [1, 10, 100, 1_000, 10_000] where lag <= revisions {
            let from = revisions - lag
            let body = ByteBuffer(string: "{\"maxRevision\":\(from),\"changeSets\":[]}")
            let iterations = lag <= 100 ? 300 : (lag <= 1_000 ? 100 : 20)
            print("lag \(lag): \(iterations) requests per path …")
            // The two servers must answer with the same JSON. Not the same gzip bytes: the cached path may
            // join change sets compressed once, where the PostgreSQL path compresses the answer whole.
            let viaCache = try await cached.sync.respond(device: try await cached.device(reader), body: body, contentEncoding: nil, acceptEncoding: "gzip", logger: logger)
            let viaPostgres = try await plain.sync.respond(device: try await plain.device(reader), body: body, contentEncoding: nil, acceptEncoding: "gzip", logger: logger)
            guard viaCache.gzipped, viaPostgres.gzipped else { throw BenchError("an answer at lag \(lag) was not gzip-compressed") }
            let json = try Gzip.inflate(viaCache.body, maxSize: 1 << 30)
            guard json == (try Gzip.inflate(viaPostgres.body, maxSize: 1 << 30)) else {
                throw BenchError("the cached and uncached answers differ at lag \(lag)")
            }

            let serve = { (server: Server, encoding: String?) in
                _ = try await server.sync.respond(device: try await server.device(reader), body: body, contentEncoding: nil, acceptEncoding: encoding, logger: logger)
            }
            let redisServer = try await measure(iterations) { try await serve(cached, "gzip") }
            let redisClient = try await measure(iterations) { _ = try await client.sync(token: reader, body: body) }
            let postgresServer = try await measure(iterations) { try await serve(plain, "gzip") }
            let redisIdentity = try await measure(iterations) { try await serve(cached, nil) }
            let postgresIdentity = try await measure(iterations) { try await serve(plain, nil) }
            let postgresClient = try await measure(iterations) { _ = try await plainClient.sync(token: reader, body: body) }
            // The least any server could do: fetch the same stored fragments (runs and single change
            // sets, as the cached server picks them) and join them into one gzip member.
            let cacheKeys = CacheKeys(prefix: cached.settings.cachePrefix, instance: instance)
            let spans = CachedRun.cover(from + 1, revisions)
            // Every piece after the first chained after the one before it, as the cached server sends them.
            let keys = spans.enumerated().map { index, span in
                switch span {
                case .single(let number): index == 0 ? cacheKeys.deflated(number) : cacheKeys.chained(number)
                case .run(let size, let run, _): index == 0 ? cacheKeys.run(size, run) : cacheKeys.chainedRun(size, run)
                }
            }
            let floor = try await measure(iterations) {
                var assembler = GzipAssembler(capacity: Int(lag) * 256)
                assembler.write("{\"changeSets\":[" as StaticString)
                for (index, (span, value)) in zip(spans, try await redis.mget(keys)).enumerated() {
                    guard var value else { throw SettingsError("the floor found a hole in the cache") }
                    switch span {
                    case .run:
                        guard let run = CachedRun.decode(value, chained: index > 0) else { throw SettingsError("the floor found a run it cannot read") }
                        assembler.write(run.fragment)
                    case .single where index > 0:
                        // [author id: 8][ChainedFragment's layout]
                        guard value.readInteger(as: Int64.self) != nil, let chained = ChainedFragment.decode(&value) else {
                            throw SettingsError("the floor found a chained entry it cannot read")
                        }
                        assembler.write(chained.fragment)
                    case .single:
                        // [author id: 8][JSON length: 4][CRC-32: 4][fragment]
                        guard value.readInteger(as: Int64.self) != nil, let (fragment, _) = value.readFragment(chained: false) else {
                            throw SettingsError("the floor found an entry it cannot read")
                        }
                        assembler.write(fragment)
                    }
                }
                assembler.write("],\"maxRevision\":\(revisions)}")
                _ = assembler.finish()
            }
            rows.append(CatchUpRow(
                lag: Int(lag), jsonBytes: json.readableBytes,
                redisGzipBytes: viaCache.body.readableBytes, postgresGzipBytes: viaPostgres.body.readableBytes,
                redisServer: Latencies(redisServer), redisClient: Latencies(redisClient),
                postgresServer: Latencies(postgresServer), postgresClient: Latencies(postgresClient), floor: Latencies(floor),
                redisServerIdentity: Latencies(redisIdentity), postgresServerIdentity: Latencies(postgresIdentity)))
        }
        return rows
    }

    /// One row per concurrency level, through the cached server.
    private func measureWrites(seconds: Int, client: BenchClient) async throws -> [WriteRow] {
        var writes: [WriteRow] = []
        for devices in Self.writeDevices {
            print("writes with \(devices) devices for \(seconds) s …")
            writes.append(try await measureWrites(devices: devices, seconds: seconds, client: client))
        }
        return writes
    }

    /// A synthetic log: every revision a ~`entryBytes` change set creating one note, written in one statement.
    private func loadLog(loaderToken: String, cached: Server) async throws {
        let schema = cached.schema
        var applied = AppliedChangeSet(seq: nil, types: ["notes"])
        let padding = String(repeating: "x", count: max(0, entryBytes - 200))
        applied.create("notes", CreatedRecord(id: 1, temporaryId: -1, values: ["author_id": .null, "player_id": .null, "body": .string(padding), "pinned": false]))
        let body = String(decoding: LogEntryEncoder.encode(applied, schema: schema, author: false), as: UTF8.self)
        let author = String(decoding: LogEntryEncoder.encode(applied, schema: schema, author: true), as: UTF8.self)
        try await SQL.run(
            on: benchURL,
            """
            INSERT INTO revsync_log (revision, device_id, seq, body, author_body)
            SELECT g, (SELECT id FROM revsync_devices WHERE role = 'admin' LIMIT 1), NULL,
                   replace(replace('\(body)', chr(1), g::text), '"create":[1]', '"create":[' || g || ']'),
                   replace('\(author)', chr(1), g::text)
            FROM generate_series(1, \(revisions)) AS g;
            UPDATE revsync_head SET head = \(revisions);
            """, logger: logger)
    }

    /// Reads the whole log once through the cached server, so the Redis path starts warm.
    func warm(_ server: Server, token: String, head: Int64? = nil) async throws {
        let revisions = head ?? self.revisions
        // Asking from the loaded head makes the server check PostgreSQL's head, which raises the cached one.
        let atHead = ByteBuffer(string: "{\"maxRevision\":\(revisions),\"changeSets\":[]}")
        _ = try await server.sync.respond(device: try await server.device(token), body: atHead, contentEncoding: nil, acceptEncoding: nil, logger: logger)
        var position: Int64 = 0
        while position < revisions {
            let body = ByteBuffer(string: "{\"maxRevision\":\(position),\"changeSets\":[]}")
            let answer = try await server.sync.respond(device: try await server.device(token), body: body, contentEncoding: nil, acceptEncoding: nil, logger: logger)
            let response = try JSONDecoder().decode(SyncResponse.self, from: Data(answer.body.readableBytesView))
            guard response.maxRevision > position else { throw SettingsError("warming stalled at \(position)") }
            position = response.maxRevision
        }
    }

    /// `count` new writing devices' tokens, and the head they start from.
    private func registerWriters(_ count: Int, named name: String, client: BenchClient) async throws -> (tokens: [String], start: Int64) {
        var tokens: [String] = []
        for index in 0..<count { tokens.append(try await client.register("\(name)-\(count)-\(index)", role: "member", adminToken: Self.adminToken)) }
        return (tokens, try await client.head(token: tokens[0]))
    }

    /// The same levels driven by wrk (`WrkWriters`), each with devices of its own.
    private func measureWrites(by wrk: Wrk, seconds: Int, client: BenchClient) async throws -> [WriteRow] {
        var rows: [WriteRow] = []
        for devices in Self.writeDevices {
            print("writes by wrk with \(devices) devices for \(seconds) s …")
            let (tokens, start) = try await registerWriters(devices, named: "wrk-writer", client: client)
            let run = try await wrk.run(
                url: "http://127.0.0.1:\(client.port)/sync", script: WrkWriters.script(tokens: tokens, start: start), threads: devices,
                connections: devices, seconds: seconds)
            rows.append(WriteRow(devices: devices, changeSets: run.requests, seconds: run.seconds, latency: run.latency))
        }
        return rows
    }

    /// `devices` devices each sending one change set per request until the time is up.
    private func measureWrites(devices: Int, seconds: Int, client: BenchClient) async throws -> WriteRow {
        let (tokens, start) = try await registerWriters(devices, named: "writer", client: client)
        let clock = ContinuousClock()
        let began = clock.now, deadline = began + .seconds(seconds)
        let samples = try await withThrowingTaskGroup(of: [Duration].self) { group in
            for token in tokens {
                group.addTask {
                    var samples: [Duration] = []
                    var seq: Int64 = 1
                    var known = start
                    while ContinuousClock.now < deadline {
                        let body = ByteBuffer(string: """
                            {"maxRevision":\(known),"changeSets":[{"seq":\(seq),"types":["notes"],"notes":{"create":[\(-seq)],\
                            "attributes":{"\(-seq)":{"body":"bench note \(seq)","pinned":false}}}}]}
                            """)
                        var answer = ByteBuffer()
                        samples.append(try await clock.measure { answer = try await client.sync(token: token, body: body, gzip: false) })
                        // Like wrk, the load generator reads only what it needs: decoding every caught-up
                        // change set would make the clients, not the server, the bottleneck.
                        known = try SyncAnswer.maxRevision(of: answer)
                        seq += 1
                    }
                    return samples
                }
            }
            return try await group.reduce(into: []) { $0 += $1 }
        }
        // Until the last device's last answer: the requests in flight at the deadline count, and so does their time.
        let elapsed = clock.now - began
        return WriteRow(devices: devices, changeSets: samples.count, seconds: elapsed.inSeconds, latency: Latencies(samples))
    }
}
