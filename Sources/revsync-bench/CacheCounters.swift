import Foundation
import RevsyncServer

/// The cache counters of one in-process server, read from its metrics: the bench checks with
/// them that an answer it credits to Redis did not fall back to PostgreSQL.
struct CacheCounters: Equatable {
    let misses: Int
    let backfills: Int

    init(_ server: Server) {
        let exposition = server.metrics.exposition()
        func counter(_ name: String) -> Int {
            // `name value` at the start of a line; a counter never incremented is not written at all.
            for line in exposition.split(separator: "\n") where line.hasPrefix(name + " ") {
                return Int(Double(line.dropFirst(name.count + 1).trimmingCharacters(in: .whitespaces)) ?? 0)
            }
            return 0
        }
        misses = counter("revsync_cache_misses_total")
        backfills = counter("revsync_cache_backfills_total")
    }
}
