import Foundation

/// One page of the paged walk: what it holds, and its server-side latency on each path.
struct PageRow: Codable {
    /// From 1, in the order the device asks for them.
    let page: Int
    /// The `maxRevision` the device sends for it.
    let after: Int64
    let changeSets: Int
    let jsonBytes: Int
    let redisGzipBytes: Int
    let postgresGzipBytes: Int
    let redisServer: Latencies
    let postgresServer: Latencies

    /// Server-side p50 of the Redis path over PostgreSQL-only (below 1 is faster).
    var redisOverPostgres: Double { redisServer.p50 / max(postgresServer.p50, 1) }
}

/// A device `lag` behind walking page by page with the limits `revsync serve` runs with.
struct PagedCatchUpReport: Codable {
    let lag: Int
    /// The page limits of both servers (REVSYNC_CATCHUP_MAX_CHANGE_SETS, REVSYNC_CATCHUP_MAX_BYTES).
    let maxChangeSets: Int
    let maxBytes: Int
    /// Walks per path: each page's latencies have this many samples.
    let walks: Int
    let pages: [PageRow]
    /// A whole walk, its pages' server-side times added up.
    let redisWalk: Latencies
    let postgresWalk: Latencies

    func table() -> [String] {
        let f = Latencies.format, cell = BenchReport.cell
        func pair(_ latencies: Latencies) -> String { cell("\(f(latencies.p50)) / \(f(latencies.p99))", 19) }
        func ratio(_ value: Double) -> String { String(format: "%.2f", value) }
        var lines = [
            "Paged catch-up at lag \(lag) (pages of at most \(maxChangeSets) change sets / \(maxBytes) B, gzip responses; "
                + "server-side p50 / p99 over \(walks) walks per path)",
            "page | after     | change sets | gz (a) B  | gz (b) B  | (a) redis server    | (b) pg server       | a/b p50",
        ]
        for row in pages {
            lines.append(
                [
                    cell(String(row.page), 4), cell(String(row.after), 9), cell(String(row.changeSets), 11),
                    cell(String(row.redisGzipBytes), 9), cell(String(row.postgresGzipBytes), 9),
                    pair(row.redisServer), pair(row.postgresServer), ratio(row.redisOverPostgres),
                ].joined(separator: " | "))
        }
        lines.append(
            [
                cell("walk", 4), cell("-", 9), cell(String(pages.map(\.changeSets).reduce(0, +)), 11),
                cell(String(pages.map(\.redisGzipBytes).reduce(0, +)), 9), cell(String(pages.map(\.postgresGzipBytes).reduce(0, +)), 9),
                pair(redisWalk), pair(postgresWalk), ratio(redisWalk.p50 / max(postgresWalk.p50, 1)),
            ].joined(separator: " | "))
        let ratios = pages.map(\.redisOverPostgres)
        if let worst = ratios.max(), let best = ratios.min() {
            let verdict = worst < 1 ? "faster at every page" : "not faster at every page"
            lines.append("The Redis path is \(verdict): a/b p50 from \(ratio(best)) to \(ratio(worst)). walk: one walk's pages added up.")
        }
        lines.append("p99 over \(walks) samples is close to the slowest of them.")
        return lines
    }
}
