import Foundation

/// One lag's catch-up figures for the three paths.
struct CatchUpRow: Codable {
    let lag: Int
    /// The answer's JSON, the same from both servers.
    let jsonBytes: Int
    /// The gzip answers on the wire: the cached path may join change sets compressed once, the
    /// PostgreSQL path compresses the answer whole, which is what the cached one should stay close to.
    let redisGzipBytes: Int
    let postgresGzipBytes: Int
    let redisServer: Latencies
    let redisClient: Latencies
    let postgresServer: Latencies
    let postgresClient: Latencies
    let floor: Latencies
    /// Server-side without gzip: what the storage paths cost on their own.
    let redisServerIdentity: Latencies
    let postgresServerIdentity: Latencies

    /// Server-side p50 of the Redis path over PostgreSQL-only (below 1 is faster).
    var redisOverPostgres: Double { redisServer.p50 / max(postgresServer.p50, 1) }
    /// Server-side p50 of the Redis path over the floor.
    var redisOverFloor: Double { redisServer.p50 / max(floor.p50, 1) }
    /// The same as `redisOverPostgres` without gzip.
    var identityRedisOverPostgres: Double { redisServerIdentity.p50 / max(postgresServerIdentity.p50, 1) }
    /// Gzip bytes of the cached answer over the whole-answer compression (above 1 is larger).
    var gzipRedisOverPostgres: Double { Double(redisGzipBytes) / Double(max(postgresGzipBytes, 1)) }
}

/// One wrk run: the requests completed in its time, and their latency as wrk measured it.
struct WrkRun: Codable {
    let requests: Int
    let seconds: Double
    let latency: Latencies
    var perSecond: Double { Double(requests) / max(seconds, 1e-9) }
}

/// Part (d) at one connection count and lag: the same load on both servers.
struct LoadRow: Codable {
    let connections: Int
    let lag: Int
    let redis: WrkRun
    let postgres: WrkRun
    /// Requests/s of the Redis path over PostgreSQL-only (above 1 is faster).
    var redisOverPostgres: Double { redis.perSecond / max(postgres.perSecond, 1e-9) }
}

/// `GET /health` on the cached server: what the HTTP layer serves when a request does nothing.
struct HealthRow: Codable {
    let connections: Int
    let run: WrkRun
}

struct LoadReport: Codable {
    /// Each wrk run's duration, and its threads.
    let seconds: Int
    let threads: Int
    let health: [HealthRow]
    let sync: [LoadRow]

    /// The Redis path's requests/s over `/health` at the same connections.
    func redisOverHealth(_ row: LoadRow) -> Double? {
        health.first { $0.connections == row.connections }.map { row.redis.perSecond / max($0.run.perSecond, 1e-9) }
    }
}

struct WriteRow: Codable {
    let devices: Int
    let changeSets: Int
    let seconds: Double
    var perSecond: Double { Double(changeSets) / seconds }
    let latency: Latencies
}

/// The SQL-only floor at one batch size; its latency is per commit.
struct FloorRow: Codable {
    /// Change sets per commit: 1 is serialized, one commit per change set.
    let perCommit: Int
    let commits: Int
    let changeSets: Int
    let seconds: Double
    let latency: Latencies
    var perSecond: Double { Double(changeSets) / seconds }
    var label: String { Self.label(perCommit: perCommit) }

    init(perCommit: Int, commits: Int, seconds: Double, latency: Latencies) {
        self.perCommit = perCommit
        self.commits = commits
        self.changeSets = commits * perCommit
        self.seconds = seconds
        self.latency = latency
    }

    static func label(perCommit: Int) -> String { perCommit == 1 ? "serialized" : "batched k=\(perCommit)" }
}

struct BenchReport: Codable, ReportFile {
    let machine: String
    let date: String
    let revisions: Int64
    let entryBytes: Int
    /// fsync and synchronous_commit as the bench database saw them.
    let durability: String
    /// Empty with `--writes-only`.
    let catchUp: [CatchUpRow]
    /// A device at lag 10,000 paging with the default limits; nil with `--writes-only` or a shorter log.
    let pagedCatchUp: PagedCatchUpReport?
    /// Wire bytes on the small text-like log; nil with `--writes-only`.
    let textBytes: TextBytesReport?
    /// Part (d); nil with `--writes-only` or `--load-seconds 0`.
    let load: LoadReport?
    /// Empty with `--catch-up-only`, as is `floor`.
    let writes: [WriteRow]
    /// The same writes driven by wrk from its own process (`WrkWriters`); empty also without wrk.
    let wrkWrites: [WriteRow]
    let floor: [FloorRow]
    /// `--push` only, which measures nothing else.
    let push: PushReport?

    /// The batched floor that got the most change sets through: what a server writing one
    /// change set per commit is compared with.
    var bestBatchedFloor: FloorRow? { floor.filter { $0.perCommit > 1 }.max { $0.perSecond < $1.perSecond } }

    func table() -> String {
        var sections: [[String]] = []
        if !catchUp.isEmpty { sections.append(catchUpTable()) }
        if let pagedCatchUp { sections.append(pagedCatchUp.table()) }
        if let textBytes { sections.append(textBytes.table()) }
        if let load { sections.append(loadTable(load)) }
        if !writes.isEmpty {
            sections.append(writesTable(writes, name: "Writes", what: "one change set per request over loopback, each device its own connection and seq"))
        }
        if !wrkWrites.isEmpty {
            sections.append(writesTable(wrkWrites, name: "Writes by wrk", what: "the same, from wrk's own process: one thread, connection and device each"))
        }
        if !floor.isEmpty { sections.append(floorTable()) }
        if let push { sections.append(push.table()) }
        return sections.map { $0.joined(separator: "\n") }.joined(separator: "\n\n")
    }

    private func catchUpTable() -> [String] {
        let f = Latencies.format
        var lines = [
            "Catch-up (\(revisions) revisions of ~\(entryBytes) B, gzip responses; p50 / p99, server-side and client-side over loopback)",
            "lag    | json B    | gz (a) B  | gz (b) B  | a/b gz | (a) redis server  | (a) redis client  | (b) pg server     | (b) pg client     | (c) floor MGET+gz | a/b p50 | a/c p50 | no gzip: a server | b server          | a/b",
        ]
        // Padded, never cut: a latency in seconds would otherwise lose its digits.
        func pair(_ latencies: Latencies) -> String { Self.cell("\(f(latencies.p50)) / \(f(latencies.p99))", 17) }
        for row in catchUp {
            lines.append(
                [
                    String(row.lag).padding(toLength: 6, withPad: " ", startingAt: 0),
                    Self.cell(String(row.jsonBytes), 9), Self.cell(String(row.redisGzipBytes), 9), Self.cell(String(row.postgresGzipBytes), 9),
                    Self.cell(String(format: "%.3f", row.gzipRedisOverPostgres), 6),
                    pair(row.redisServer), pair(row.redisClient), pair(row.postgresServer), pair(row.postgresClient), pair(row.floor),
                    String(format: "%.2f", row.redisOverPostgres).padding(toLength: 7, withPad: " ", startingAt: 0),
                    String(format: "%.2f", row.redisOverFloor).padding(toLength: 7, withPad: " ", startingAt: 0),
                    pair(row.redisServerIdentity), pair(row.postgresServerIdentity),
                    String(format: "%.2f", row.identityRedisOverPostgres),
                ].joined(separator: " | "))
        }
        lines.append("p50 / p99 each; a/b < 1 means the Redis path is faster; a/c is the Redis path over the floor.")
        lines.append("a/b gz: the cached answer's gzip bytes over the PostgreSQL path's, which compresses the answer whole (target ≤ 1.10).")
        return lines
    }

    private func loadTable(_ load: LoadReport) -> [String] {
        let f = Latencies.format
        func rate(_ run: WrkRun) -> String { String(format: "%.0f", run.perSecond) }
        func pair(_ run: WrkRun) -> String { "\(f(run.latency.p50)) / \(f(run.latency.p99))" }
        var lines = [
            "(d) Many catch-up clients at once (wrk -t\(load.threads), \(load.seconds) s per run, one reader device, gzip; requests/s, and p50 / p99 as wrk saw them over loopback)",
            "conns | lag    | (a) redis req/s | (a) p50 / p99         | (b) pg req/s | (b) p50 / p99         | a/b    | a ÷ /health",
        ]
        for row in load.sync {
            lines.append(
                [
                    Self.cell(String(row.connections), 5), Self.cell(String(row.lag), 6),
                    Self.cell(rate(row.redis), 15), Self.cell(pair(row.redis), 21),
                    Self.cell(rate(row.postgres), 12), Self.cell(pair(row.postgres), 21),
                    Self.cell(String(format: "%.2f", row.redisOverPostgres), 6),
                    load.redisOverHealth(row).map { String(format: "%.3f", $0) } ?? "-",
                ].joined(separator: " | "))
        }
        lines.append("GET /health on the cached server, the HTTP ceiling:")
        for row in load.health {
            lines.append([Self.cell(String(row.connections), 5), Self.cell("-", 6), Self.cell(rate(row.run), 15), pair(row.run)].joined(separator: " | "))
        }
        lines.append("a/b > 1 means the Redis path serves more requests/s; a ÷ /health is the Redis path over the ceiling at the same connections.")
        return lines
    }

    private func writesTable(_ writes: [WriteRow], name: String, what: String) -> [String] {
        let best = bestBatchedFloor
        var lines = [
            "\(name) (\(what); \(durability); \(Self.seconds(writes.map(\.seconds))) s each)",
            "devices | change sets/s | p50        | p90        | p99        | max        | ÷ batched floor",
        ]
        for row in writes {
            lines.append(
                [
                    Self.cell(String(row.devices), 7), Self.cell(String(format: "%.0f", row.perSecond), 13),
                    Self.latencyCells(row.latency),
                    best.map { String(format: "%.3f", row.perSecond / max($0.perSecond, 1)) } ?? "-",
                ].joined(separator: " | "))
        }
        if let best {
            lines.append("÷ batched floor: change sets/s over the floor's \(best.label) (\(String(format: "%.0f", best.perSecond)) change sets/s).")
        }
        return lines
    }

    private func floorTable() -> [String] {
        var lines = [
            "Floor (SQL only, one connection: head + note + log entry per change set, one autocommit statement per commit, latency per commit; \(Self.seconds(floor.map(\.seconds))) s each)",
            "mode            | change sets/s | p50        | p90        | p99        | max",
        ]
        for row in floor {
            let cells = [Self.cell(row.label, 15), Self.cell(String(format: "%.0f", row.perSecond), 13), Self.latencyCells(row.latency)]
            lines.append(cells.joined(separator: " | ").trimmingCharacters(in: .whitespaces))
        }
        return lines
    }

    /// `p50 | p90 | p99 | max`, padded.
    private static func latencyCells(_ latency: Latencies) -> String {
        let f = Latencies.format
        return [latency.p50, latency.p90, latency.p99, latency.max].map { cell(f($0), 10) }.joined(separator: " | ")
    }

    /// `text` padded to `width`, never cut: a figure wider than its column shifts the row instead.
    static func cell(_ text: String, _ width: Int) -> String { text + String(repeating: " ", count: max(0, width - text.count)) }

    /// The measured durations, rounded: "10", or "10–11" when they differ.
    private static func seconds(_ durations: [Double]) -> String {
        guard let low = durations.min(), let high = durations.max() else { return "?" }
        let (from, to) = (String(format: "%.0f", low), String(format: "%.0f", high))
        return from == to ? from : "\(from)–\(to)"
    }

}
