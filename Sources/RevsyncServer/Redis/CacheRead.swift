import NIOCore
import RevsyncRedis
import RevsyncRules

/// A catch-up read from Redis in (usually) one round trip: a single `MGET` of the head, the
/// horizon and the range up to the head this instance expects, in the form the answer needs.
///
/// The range's end is a guess (the highest head this instance has seen, from its own commits
/// and earlier reads), so a read that finds the head moved on fetches the rest with another
/// `MGET`, and one that guessed too far ignores what lies past the head. A Lua script could
/// decide the range inside Redis, but copying every value into Lua and back cost 3–4× the
/// plain `MGET` at a lag of 1,000 (measured with redis-benchmark on this machine).
struct CacheRead: Sendable {
    /// Nil when the cache holds no head or horizon (flushed, or never written).
    let state: LogState?
    /// From `after + 1` on, without a gap, up to the hole or the page's end.
    let entries: [LogEntry]
    let more: Bool
    /// The first revision the cache lacks, where the entries stop.
    let hole: Int64?
    /// The devices that made the entries (`CatchUpPage.authors`).
    var authors: Set<Int64> = []
}

extension RedisChangeLog {
    private typealias Item = CachedRun.Span

    /// - Parameters:
    ///   - floor: read at least this far (the caller's own commits), whatever the cached head says.
    ///   - own: revisions the caller knows are the device's own: their author form is asked for at once.
    func readCache(
        after revision: Int64, floor: Int64?, own: Set<Int64>, device: Device, limits: CatchUpLimits, form: EntryForm, keys: CacheKeys
    ) async throws -> CacheRead {
        let key = { (number: Int64) in
            switch form {
            case .plain: own.contains(number) ? keys.author(number) : keys.entry(number)
            case .deflated: own.contains(number) ? keys.authorDeflated(number) : keys.deflated(number)
            }
        }
        // A gzip answer takes the longest aligned runs that fit the range and hold none of the caller's commits.
        let items = { (first: Int64, last: Int64) -> [Item] in
            form == .plain ? (first...last).map { Item.single($0) } : CachedRun.cover(first, last, excluding: own)
        }
        let itemKey = { (item: Item) in
            switch item {
            case .single(let number): key(number)
            case .run(let size, let index, _): keys.run(size, index)
            }
        }
        // A device may send any maxRevision up to Int64.max (it is refused after this read): saturate, never trap.
        let plus = { (a: Int64, b: Int64) in a.addingReportingOverflow(b).overflow ? Int64.max : a + b }
        let pageEnd = plus(revision, Int64(limits.maxChangeSets))
        // Reading stops at the byte limit: a chunk holds about as many entries as the limit takes.
        let chunk = Int64(max(16, min(limits.maxChangeSets, limits.maxBytes / max(64, Int(averageBytesPerForm)))))
        let guess = min(pageEnd, plus(revision, chunk), max(revision, knownHead, floor ?? 0))
        var pending = revision < guess ? items(revision + 1, guess) : []
        var values = try await redis.mget([keys.head, keys.horizon] + pending.map(itemKey))
        guard let head = values[0].flatMap({ Int64(String(buffer: $0)) }), let horizon = values[1].flatMap({ Int64(String(buffer: $0)) }) else {
            return CacheRead(state: nil, entries: [], more: false, hole: plus(revision, 1))
        }
        remember(LogState(head: head, horizon: horizon))
        values.removeFirst(2)
        let through = min(pageEnd, max(head, floor ?? 0))
        var pager = CatchUpPager(limits: limits)
        var entries: [LogEntry] = []
        var owners: [Int64] = []
        var authors: Set<Int64> = []
        var position = revision
        let stop = { (hole: Int64?) in
            var read = try await self.finish(
                entries, owners, head: head, horizon: horizon, hole: hole, more: hole == nil && (pager.full || position < max(head, floor ?? 0)),
                own: own, device: device, limits: limits, form: form, keys: keys)
            read.authors = authors
            return read
        }
        while true {
            // Runs the caller cannot take whole (missing, or holding its own change sets) go one by one: one more MGET for all of them.
            let broken = pending.indices.filter { index in
                guard case .run = pending[index] else { return false }
                guard let value = values[index], let run = CachedRun.decode(value) else { return true }
                return run.authors.contains(device.id)
            }
            if !broken.isEmpty {
                let singles = broken.map { index -> [Item] in
                    guard case .run(let size, _, let first) = pending[index] else { return [] }
                    return (first..<(first + size)).map { Item.single($0) }
                }
                let fetched = try await redis.mget(singles.flatMap { $0 }.map(itemKey))
                var offset = fetched.startIndex
                var expanded: [Item] = [], expandedValues: [ByteBuffer?] = []
                var next = 0
                for index in pending.indices {
                    if next < broken.count, broken[next] == index {
                        let count = singles[next].count
                        expanded += singles[next]
                        expandedValues += fetched[offset..<(offset + count)]
                        offset += count
                        next += 1
                    } else {
                        expanded.append(pending[index])
                        expandedValues.append(values[index])
                    }
                }
                (pending, values) = (expanded, expandedValues)
            }
            var index = 0
            while index < pending.count {
                let (item, value) = (pending[index], values[index])
                index += 1
                switch item {
                case .run(let size, _, let first):
                    guard first + size - 1 <= through else { return try await stop(nil) }
                    if let value, let run = CachedRun.decode(value), !run.authors.contains(device.id),
                        pager.admitRun(count: Int(size), size: run.fragment.length)
                    {
                        entries.append(LogEntry(revision: first, body: .deflatedRun(run.fragment)))
                        authors.formUnion(run.authors)
                        owners.append(0)
                        for number in (first + 1)..<(first + size) {
                            entries.append(LogEntry(revision: number, body: .inRun))
                            owners.append(0)
                        }
                        position = first + size - 1
                    } else {
                        // Ending the page inside (or gone since): one by one, the pager decides where.
                        let singles = (first..<(first + size)).map { Item.single($0) }
                        let fetched = try await redis.mget(singles.map(itemKey))
                        pending.replaceSubrange(index..<index, with: singles)
                        values.replaceSubrange(index..<index, with: fetched)
                    }
                case .single(let number):
                    guard number <= through else { return try await stop(nil) }
                    guard let value, let decoded = CachedEntry.decode(value, form: form) else { return try await stop(number) }
                    guard pager.admit(size: decoded.body.size) else { return try await stop(nil) }
                    entries.append(LogEntry(revision: number, body: decoded.body))
                    owners.append(decoded.device)
                    authors.insert(decoded.device)
                    position = number
                }
            }
            guard position < through else { return try await stop(nil) }
            pending = items(position + 1, min(through, plus(position, chunk)))
            values = try await redis.mget(pending.map(itemKey))
        }
    }

    /// Swaps in the author's form of the device's own revisions it did not know were its own
    /// (one more `MGET`, only then), and ends the page again by the bytes of that form.
    private func finish(
        _ read: [LogEntry], _ owners: [Int64], head: Int64, horizon: Int64, hole: Int64?, more: Bool, own: Set<Int64>, device: Device,
        limits: CatchUpLimits, form: EntryForm, keys: CacheKeys
    ) async throws -> CacheRead {
        let state = LogState(head: head, horizon: horizon)
        let mine = zip(read, owners).filter { $0.1 == device.id && !own.contains($0.0.revision) }.map(\.0.revision)
        guard !mine.isEmpty else { return CacheRead(state: state, entries: read, more: more, hole: hole) }
        let authored = try await redis.mget(mine.map { form == .plain ? keys.author($0) : keys.authorDeflated($0) })
        var bodies: [Int64: LogEntry.Body] = [:]
        for (number, value) in zip(mine, authored) {
            if let value, let decoded = CachedEntry.decode(value, form: form) { bodies[number] = decoded.body }
        }
        var pager = CatchUpPager(limits: limits)
        var entries: [LogEntry] = []
        for entry in read {
            let body: LogEntry.Body
            if mine.contains(entry.revision) {
                // Evicted between the two reads: PostgreSQL fills it in.
                guard let found = bodies[entry.revision] else { return CacheRead(state: state, entries: entries, more: false, hole: entry.revision) }
                body = found
            } else {
                body = entry.body
            }
            let swapped = LogEntry(revision: entry.revision, body: body)
            guard pager.admit(size: swapped.size) else { return CacheRead(state: state, entries: entries, more: true, hole: nil) }
            entries.append(swapped)
        }
        return CacheRead(state: state, entries: entries, more: more, hole: hole)
    }
}
