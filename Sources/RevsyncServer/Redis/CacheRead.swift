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
    /// One key of a read: a change set or an aligned run, alone or chained after the revision before it.
    private struct Piece {
        let span: CachedRun.Span
        let chained: Bool

        var first: Int64 {
            switch span {
            case .single(let number): number
            case .run(_, _, let first): first
            }
        }
    }

    /// - Parameters:
    ///   - floor: read at least this far (the caller's own commits), whatever the cached head says.
    ///   - own: revisions the caller knows are the device's own: their author form is asked for at once.
    func readCache(
        after revision: Int64, floor: Int64?, own: Set<Int64>, device: Device, limits: CatchUpLimits, form: EntryForm, keys: CacheKeys
    ) async throws -> CacheRead {
        let key = { (number: Int64) -> CacheSlot in
            switch form {
            case .plain: own.contains(number) ? .author(number) : .entry(number)
            case .deflated: own.contains(number) ? .authorDeflated(number) : .deflated(number)
            }
        }
        // A piece goes chained when the answer sends the public form of the revision before it
        // just before it: not first in the answer, not after (or being) the caller's own.
        let piece = { (span: CachedRun.Span) -> Piece in
            let first = Piece(span: span, chained: false).first
            let chained = form == .deflated && first - 1 > revision && !own.contains(first - 1) && !own.contains(first)
            return Piece(span: span, chained: chained)
        }
        // A gzip answer takes the longest aligned runs that fit the range and hold none of the caller's commits.
        let pieces = { (first: Int64, last: Int64) -> [Piece] in
            (form == .plain ? (first...last).map { CachedRun.Span.single($0) } : CachedRun.cover(first, last, excluding: own)).map(piece)
        }
        let pieceKey = { (piece: Piece) -> CacheSlot in
            switch (piece.span, piece.chained) {
            case (.single(let number), false): key(number)
            case (.single(let number), true): .chained(number)
            case (.run(let size, let index, _), false): .run(size: size, index: index)
            case (.run(let size, let index, _), true): .chainedRun(size: size, index: index)
            }
        }
        // A device may send any maxRevision up to Int64.max (it is refused after this read): saturate, never trap.
        let plus = { (a: Int64, b: Int64) in a.addingReportingOverflow(b).overflow ? Int64.max : a + b }
        let pageEnd = plus(revision, Int64(limits.maxChangeSets))
        // Reading stops at the byte limit: a chunk holds about as many entries as the limit takes.
        let chunk = Int64(max(16, min(limits.maxChangeSets, limits.maxBytes / max(64, Int(averageBytesPerForm)))))
        let guess = min(pageEnd, plus(revision, chunk), max(revision, knownHead, floor ?? 0))
        var pending = revision < guess ? pieces(revision + 1, guess) : []
        let head: Int64, horizon: Int64
        var values: [ByteBuffer?]
        let pendingKeys = pending.map(pieceKey)
        if let known = stateForMemoryRead(floor: floor), let held = recentValues.values(pendingKeys) {
            // Every piece is one this instance committed a moment ago: no round trip at all.
            (head, horizon, values) = (known.head, known.horizon, held)
            metrics.recordCache("memory_reads")
        } else {
            values = try await redis.mget([keys.head, keys.horizon] + pendingKeys.map(keys.key))
            guard let cachedHead = values[0].flatMap({ Int64(String(buffer: $0)) }),
                let cachedHorizon = values[1].flatMap({ Int64(String(buffer: $0)) })
            else {
                return CacheRead(state: nil, entries: [], more: false, hole: plus(revision, 1))
            }
            (head, horizon) = (cachedHead, cachedHorizon)
            remember(LogState(head: head, horizon: horizon))
            values.removeFirst(2)
        }
        let through = min(pageEnd, max(head, floor ?? 0))
        var pager = CatchUpPager(limits: limits)
        var read = ReadEntries()
        var authors: Set<Int64> = []
        var position = revision
        let stop = { (hole: Int64?) in
            let more = hole == nil && (pager.full || position < max(head, floor ?? 0))
            var result: CacheRead
            if let finished = Self.finished(read, head: head, horizon: horizon, hole: hole, more: more, own: own, device: device) {
                result = finished
            } else {
                result = try await self.finish(
                    read, head: head, horizon: horizon, hole: hole, more: more, own: own, device: device, limits: limits, form: form, keys: keys)
            }
            result.authors = authors
            return result
        }
        while true {
            try await sendAloneWhereMissing(&pending, &values, key: key, keys: keys)
            // Runs the caller cannot take whole (missing, or holding its own change sets) go one by one: one more MGET for all of them.
            let broken = pending.indices.filter { index in
                guard case .run = pending[index].span else { return false }
                guard let value = values[index], let run = CachedRun.decode(value, chained: pending[index].chained) else { return true }
                return run.authors.contains(device.id)
            }
            if !broken.isEmpty {
                let singles = broken.map { index -> [Piece] in
                    guard case .run(let size, _, let first) = pending[index].span else { return [] }
                    return (first..<(first + size)).map { piece(.single($0)) }
                }
                let fetched = try await fetchValues(singles.flatMap { $0 }.map(pieceKey), keys: keys)
                Self.expand(&pending, &values, broken: broken, into: singles, fetched: fetched)
                // Chained singles of a broken run may be missing too: the loop's first step again.
                continue
            }
            var index = 0
            taking: while true {
                switch Self.take(
                    pending, values, from: &index, through: through, device: device, form: form, pager: &pager, read: &read, authors: &authors,
                    position: &position)
                {
                case .stop(let hole):
                    return try await stop(hole)
                case .split(let first, let size):
                    // Ending the page inside (or gone since): one by one, the pager decides where.
                    var singles = (first..<(first + size)).map { piece(.single($0)) }
                    var fetched = try await fetchValues(singles.map(pieceKey), keys: keys)
                    try await sendAloneWhereMissing(&singles, &fetched, key: key, keys: keys)
                    pending.replaceSubrange(index..<index, with: singles)
                    values.replaceSubrange(index..<index, with: fetched)
                case .taken:
                    break taking
                }
            }
            guard position < through else { return try await stop(nil) }
            pending = pieces(position + 1, min(through, plus(position, chunk)))
            values = try await fetchValues(pending.map(pieceKey), keys: keys)
        }
    }

    /// What `take` stopped at.
    private enum Taken {
        /// Every piece is taken.
        case taken
        /// The page ends here: a hole at the revision given, or none (the page is full, or at its end).
        case stop(hole: Int64?)
        /// A run to read one by one instead, before the pieces from `index` on.
        case split(first: Int64, size: Int64)
    }

    /// Takes the read pieces from `index` on into the page, as long as they fit. Synchronous
    /// and apart from `readCache`, so that its work does not enlarge that function's frame
    /// (which the request's task keeps allocated for as long as its connection lives).
    @inline(never)
    private static func take(
        _ pending: [Piece], _ values: [ByteBuffer?], from index: inout Int, through: Int64, device: Device, form: EntryForm,
        pager: inout CatchUpPager, read: inout ReadEntries, authors: inout Set<Int64>, position: inout Int64
    ) -> Taken {
        while index < pending.count {
            let (item, value) = (pending[index], values[index])
            index += 1
            switch item.span {
            case .run(let size, _, let first):
                guard first + size - 1 <= through else { return .stop(hole: nil) }
                guard let value, let run = CachedRun.decode(value, chained: item.chained), !run.authors.contains(device.id),
                    pager.admitRun(count: Int(size), size: run.fragment.length - (item.chained ? 1 : 0))
                else { return .split(first: first, size: size) }
                read.append(
                    LogEntry(revision: first, body: item.chained ? .chained(run.fragment) : .deflatedRun(run.fragment)), span: item.span, owner: nil,
                    dictionary: run.link?.dictionary, tail: nil)
                authors.formUnion(run.authors)
                for number in (first + 1)..<(first + size) {
                    read.append(LogEntry(revision: number, body: .inRun), span: nil, owner: nil, dictionary: nil, tail: number == first + size - 1 ? run.link?.tail : nil)
                }
                position = first + size - 1
            case .single(let number):
                guard number <= through else { return .stop(hole: nil) }
                if item.chained {
                    // Missing or unreadable ones went alone above.
                    guard let value, let decoded = CachedEntry.decodeChained(value) else { return .stop(hole: number) }
                    guard pager.admit(size: decoded.chained.fragment.length - 1) else { return .stop(hole: nil) }
                    read.append(
                        LogEntry(revision: number, body: .chained(decoded.chained.fragment)), span: item.span, owner: decoded.device,
                        dictionary: decoded.chained.link.dictionary, tail: decoded.chained.link.tail)
                    authors.insert(decoded.device)
                } else {
                    guard let value, let decoded = CachedEntry.decode(value, form: form) else { return .stop(hole: number) }
                    guard pager.admit(size: decoded.body.size) else { return .stop(hole: nil) }
                    // A plain fragment's CRC is its JSON's: what a chained piece after it names.
                    let tail: UInt32? = if case .deflated(let fragment) = decoded.body { fragment.crc } else { nil }
                    read.append(LogEntry(revision: number, body: decoded.body), span: item.span, owner: decoded.device, dictionary: nil, tail: tail)
                    authors.insert(decoded.device)
                }
                position = number
            }
        }
        return .taken
    }

    /// Puts each broken run's singles, with their values, where the run was.
    @inline(never)
    private static func expand(_ pending: inout [Piece], _ values: inout [ByteBuffer?], broken: [Int], into singles: [[Piece]], fetched: [ByteBuffer?]) {
        var offset = fetched.startIndex
        var expanded: [Piece] = [], expandedValues: [ByteBuffer?] = []
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

    /// The state a read may take instead of the cached head and horizon, when its pieces are
    /// all in `recentValues`: for a writing request (`floor`, its own commits), this
    /// instance's latest, which its own batch's cache write has just refreshed (revisions
    /// after its own that another instance committed meanwhile come with its next request,
    /// as if this one had been a moment earlier); for any other read, only a state read
    /// within `stateFreshFor`, the same a device at the head is answered from.
    private func stateForMemoryRead(floor: Int64?) -> LogState? {
        floor != nil ? knownState : freshState
    }

    /// The values this instance holds (`recentValues`) when it holds every one, or else an
    /// `MGET` of all of them.
    func fetchValues(_ slots: [CacheSlot], keys: CacheKeys) async throws -> [ByteBuffer?] {
        if let held = recentValues.values(slots) {
            metrics.recordCache("memory_reads")
            return held
        }
        return try await redis.mget(slots.map(keys.key))
    }

    /// A chained change set that is missing (made only where the one before was at hand) goes
    /// alone instead: its plain fragment, in one more `MGET`, only then.
    private func sendAloneWhereMissing(
        _ pieces: inout [Piece], _ values: inout [ByteBuffer?], key: (Int64) -> CacheSlot, keys: CacheKeys
    ) async throws {
        let missing = pieces.indices.filter { index in
            guard pieces[index].chained, case .single = pieces[index].span else { return false }
            return values[index].flatMap(CachedEntry.decodeChained) == nil
        }
        guard !missing.isEmpty else { return }
        let fetched = try await fetchValues(missing.map { key(pieces[$0].first) }, keys: keys)
        for (index, value) in zip(missing, fetched) {
            pieces[index] = Piece(span: pieces[index].span, chained: false)
            values[index] = value
        }
    }

    /// Sends alone (one more `MGET`, only then) every chained piece whose previous change set
    /// does not go out as its dictionary: the device's own, which it gets in its author form,
    /// or bytes of another history. Then swaps in the author's form of the device's own
    /// revisions it did not know were its own, and ends the page again by the bytes of that form.
    ///
    /// `finished` first: the read as it is when there is nothing to send alone or swap, as
    /// usual. It is synchronous and apart so that the usual read does not take `finish`'s
    /// frame on its task's allocator, which keeps its high-water mark for as long as the
    /// connection lives.
    @inline(never)
    private static func finished(
        _ read: ReadEntries, head: Int64, horizon: Int64, hole: Int64?, more: Bool, own: Set<Int64>, device: Device
    ) -> CacheRead? {
        guard brokenChains(read, device: device).isEmpty, unknownOwn(read.entries, owners: read.owners, device: device, own: own).isEmpty else {
            return nil
        }
        return CacheRead(state: LogState(head: head, horizon: horizon), entries: read.entries, more: more, hole: hole)
    }

    /// The chained pieces that cannot go chained.
    private static func brokenChains(_ read: ReadEntries, device: Device) -> [Int] {
        read.entries.indices.filter { index in
            guard case .chained = read.entries[index].body else { return false }
            guard index > 0, read.owners[index - 1] != device.id else { return true }
            // Unknown after a plain run (its value has no CRC of its last change set): it was
            // made from the same committed log as the chained piece, like every cached value.
            guard let tail = read.tails[index - 1] else { return false }
            return tail != read.dictionaries[index]
        }
    }

    /// The device's own revisions the caller did not know were its own.
    private static func unknownOwn(_ entries: [LogEntry], owners: [Int64?], device: Device, own: Set<Int64>) -> [Int64] {
        zip(entries, owners).filter { $0.1 == device.id && !own.contains($0.0.revision) }.map(\.0.revision)
    }

    private func finish(
        _ read: ReadEntries, head: Int64, horizon: Int64, hole: Int64?, more: Bool, own: Set<Int64>, device: Device,
        limits: CatchUpLimits, form: EntryForm, keys: CacheKeys
    ) async throws -> CacheRead {
        let state = LogState(head: head, horizon: horizon)
        var entries = read.entries
        var hole = hole
        var more = more
        let broken = Self.brokenChains(read, device: device)
        if !broken.isEmpty {
            let fetched = try await fetchValues(
                broken.map { index -> CacheSlot in
                    if case .run(let size, let run, _) = read.spans[index] { .run(size: size, index: run) } else { .deflated(entries[index].revision) }
                }, keys: keys)
            for (index, value) in zip(broken, fetched) {
                let body: LogEntry.Body? =
                    if case .run = read.spans[index] {
                        value.flatMap { CachedRun.decode($0) }.map { .deflatedRun($0.fragment) }
                    } else {
                        value.flatMap { CachedEntry.decode($0, form: .deflated) }?.body
                    }
                guard let body else {
                    // Evicted since: PostgreSQL fills the page in from here.
                    (hole, more) = (entries[index].revision, false)
                    entries.removeSubrange(index...)
                    break
                }
                entries[index] = LogEntry(revision: entries[index].revision, body: body)
            }
        }
        let mine = Self.unknownOwn(entries, owners: read.owners, device: device, own: own)
        guard !mine.isEmpty else { return CacheRead(state: state, entries: entries, more: more, hole: hole) }
        let authored = try await fetchValues(mine.map { form == .plain ? .author($0) : .authorDeflated($0) }, keys: keys)
        var bodies: [Int64: LogEntry.Body] = [:]
        for (number, value) in zip(mine, authored) {
            if let value, let decoded = CachedEntry.decode(value, form: form) { bodies[number] = decoded.body }
        }
        var pager = CatchUpPager(limits: limits)
        var swappedEntries: [LogEntry] = []
        for entry in entries {
            let body: LogEntry.Body
            if mine.contains(entry.revision) {
                // Evicted between the two reads: PostgreSQL fills it in.
                guard let found = bodies[entry.revision] else { return CacheRead(state: state, entries: swappedEntries, more: false, hole: entry.revision) }
                body = found
            } else {
                body = entry.body
            }
            let swapped = LogEntry(revision: entry.revision, body: body)
            guard pager.admit(size: swapped.size) else { return CacheRead(state: state, entries: swappedEntries, more: true, hole: nil) }
            swappedEntries.append(swapped)
        }
        return CacheRead(state: state, entries: swappedEntries, more: more, hole: hole)
    }
}

/// What a cache read has gathered, entry by entry: who made it, and the CRC-32s that say
/// whether a chained piece fits after the one before it (`ChainedFragment`).
private struct ReadEntries {
    var entries: [LogEntry] = []
    /// The author; nil within runs, which never hold the caller's own. (Not 0: that is the id
    /// of `Device.nobody`, which a read for every woken waiter uses.)
    var owners: [Int64?] = []
    /// For a chained piece: the CRC-32 of the public JSON it must follow.
    var dictionaries: [UInt32?] = []
    /// The CRC-32 of the public JSON this entry ends with, where known.
    var tails: [UInt32?] = []

    /// What each entry was read as: a single, or the run it starts (nil within a run).
    var spans: [CachedRun.Span?] = []

    mutating func append(_ entry: LogEntry, span: CachedRun.Span?, owner: Int64?, dictionary: UInt32?, tail: UInt32?) {
        entries.append(entry)
        spans.append(span)
        owners.append(owner)
        dictionaries.append(dictionary)
        tails.append(tail)
    }
}
