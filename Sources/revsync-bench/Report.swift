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

struct BenchReport: Codable {
    let machine: String
    let date: String
    let revisions: Int64
    let entryBytes: Int
    let catchUp: [CatchUpRow]
    let writes: [WriteRow]

    func table() -> String {
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
        lines.append("")
        lines.append("Writes (one change set per request over loopback, \(writes.first.map { String(format: "%.0f", $0.seconds) } ?? "?") s each)")
        lines.append("devices | change sets/s | p50       | p90       | p99       | max")
        for row in writes {
            lines.append(
                [
                    String(row.devices).padding(toLength: 7, withPad: " ", startingAt: 0),
                    String(format: "%.0f", row.perSecond).padding(toLength: 13, withPad: " ", startingAt: 0),
                    f(row.latency.p50).padding(toLength: 9, withPad: " ", startingAt: 0),
                    f(row.latency.p90).padding(toLength: 9, withPad: " ", startingAt: 0),
                    f(row.latency.p99).padding(toLength: 9, withPad: " ", startingAt: 0),
                    f(row.latency.max),
                ].joined(separator: " | "))
        }
        return lines.joined(separator: "\n")
    }

    func write(to path: String) throws {
        let url = URL(fileURLWithPath: path)
        try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        try encoder.encode(self).write(to: url)
    }
}
