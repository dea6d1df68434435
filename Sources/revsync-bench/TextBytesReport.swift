import Foundation

/// One lag's answer sizes on the text-like log.
struct TextBytesRow: Codable {
    let lag: Int
    /// The answer's JSON, the same from both servers.
    let jsonBytes: Int
    let redisGzipBytes: Int
    let postgresGzipBytes: Int

    /// Gzip bytes of the cached answer over the whole-answer compression (above 1 is larger).
    var redisOverPostgres: Double { Double(redisGzipBytes) / Double(max(postgresGzipBytes, 1)) }
}

/// Wire bytes of catch-up answers on `TextLog`.
struct TextBytesReport: Codable {
    let revisions: Int64
    let entryBytes: Int
    let rows: [TextBytesRow]

    func table() -> [String] {
        let cell = BenchReport.cell
        var lines = [
            "Wire bytes on text-like change sets (\(revisions) revisions of ~\(entryBytes) B of words from a small vocabulary, gzip responses)",
            "lag    | json B    | gz (a) B  | gz (b) B  | a/b gz | (a) B / change set | (b) B / change set",
        ]
        for row in rows {
            lines.append(
                [
                    cell(String(row.lag), 6), cell(String(row.jsonBytes), 9), cell(String(row.redisGzipBytes), 9),
                    cell(String(row.postgresGzipBytes), 9), cell(String(format: "%.3f", row.redisOverPostgres), 6),
                    cell(String(row.redisGzipBytes / max(row.lag, 1)), 18), String(row.postgresGzipBytes / max(row.lag, 1)),
                ].joined(separator: " | "))
        }
        lines.append("a/b gz: the Redis path's joined answer over the PostgreSQL path's, which compresses the answer whole (target ≤ 1.10).")
        return lines
    }
}
