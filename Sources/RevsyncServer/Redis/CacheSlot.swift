/// Which cache value a key names, without the instance's prefix.
///
/// This instance's own copy of its latest commits (`RecentValues`) is keyed by it, and a
/// read answered from that copy builds no key at all: at 128 writing devices each answer
/// reads about 128 revisions, and building their keys (some 80 bytes each, with the
/// instance's prefix) and hashing them was a tenth of the server's CPU. The strings are
/// made only for what goes to Redis.
enum CacheSlot: Hashable, Sendable {
    case entry(Int64)
    case author(Int64)
    case deflated(Int64)
    case authorDeflated(Int64)
    case chained(Int64)
    case run(size: Int64, index: Int64)
    case chainedRun(size: Int64, index: Int64)
}

extension CacheKeys {
    /// The Redis key of `slot`.
    func key(_ slot: CacheSlot) -> String {
        switch slot {
        case .entry(let revision): entry(revision)
        case .author(let revision): author(revision)
        case .deflated(let revision): deflated(revision)
        case .authorDeflated(let revision): authorDeflated(revision)
        case .chained(let revision): chained(revision)
        case .run(let size, let index): run(size, index)
        case .chainedRun(let size, let index): chainedRun(size, index)
        }
    }
}
