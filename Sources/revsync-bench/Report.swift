import Foundation

/// One lag's catch-up figures for the three paths.
struct CatchUpRow: Codable {
    let lag: Int
    let responseBytes: Int
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

struct BenchReport: Codable {
    let machine: String
    let date: String
    let revisions: Int64
    let entryBytes: Int
    /// fsync and synchronous_commit as the bench database saw them.
    let durability: String
    /// Empty with `--writes-only`.
    let catchUp: [CatchUpRow]
    let writes: [WriteRow]
    let floor: [FloorRow]

    /// The batched floor that got the most change sets through: what a server writing one
    /// change set per commit is compared with.
    var bestBatchedFloor: FloorRow? { floor.filter { $0.perCommit > 1 }.max { $0.perSecond < $1.perSecond } }

    func table() -> String {
        var lines: [String] = []
        if !catchUp.isEmpty { lines += catchUpTable() + [""] }
        lines += writesTable() + [""] + floorTable()
        return lines.joined(separator: "\n")
    }

    private func catchUpTable() -> [String] {
        let f = Latencies.format
        var lines = [
            "Catch-up (\(revisions) revisions of ~\(entryBytes) B, gzip responses; p50 / p99, server-side and client-side over loopback)",
            "lag    | bytes(gz) | (a) redis server  | (a) redis client  | (b) pg server     | (b) pg client     | (c) floor MGET+gz | a/b p50 | a/c p50 | no gzip: a server | b server          | a/b",
        ]
        func pair(_ latencies: Latencies) -> String {
            "\(f(latencies.p50)) / \(f(latencies.p99))".padding(toLength: 17, withPad: " ", startingAt: 0)
        }
        for row in catchUp {
            lines.append(
                [
                    String(row.lag).padding(toLength: 6, withPad: " ", startingAt: 0),
                    String(row.responseBytes).padding(toLength: 9, withPad: " ", startingAt: 0),
                    pair(row.redisServer), pair(row.redisClient), pair(row.postgresServer), pair(row.postgresClient), pair(row.floor),
                    String(format: "%.2f", row.redisOverPostgres).padding(toLength: 7, withPad: " ", startingAt: 0),
                    String(format: "%.2f", row.redisOverFloor).padding(toLength: 7, withPad: " ", startingAt: 0),
                    pair(row.redisServerIdentity), pair(row.postgresServerIdentity),
                    String(format: "%.2f", row.identityRedisOverPostgres),
                ].joined(separator: " | "))
        }
        lines.append("p50 / p99 each; a/b < 1 means the Redis path is faster; a/c is the Redis path over the floor.")
        return lines
    }

    private func writesTable() -> [String] {
        let best = bestBatchedFloor
        var lines = [
            "Writes (one change set per request over loopback, each device its own connection and seq; \(durability); \(Self.seconds(writes.map(\.seconds))) s each)",
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
    private static func cell(_ text: String, _ width: Int) -> String { text + String(repeating: " ", count: max(0, width - text.count)) }

    /// The measured durations, rounded: "10", or "10–11" when they differ.
    private static func seconds(_ durations: [Double]) -> String {
        guard let low = durations.min(), let high = durations.max() else { return "?" }
        let (from, to) = (String(format: "%.0f", low), String(format: "%.0f", high))
        return from == to ? from : "\(from)–\(to)"
    }

    func write(to path: String) throws {
        let url = URL(fileURLWithPath: path)
        try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        try encoder.encode(self).write(to: url)
    }
}
