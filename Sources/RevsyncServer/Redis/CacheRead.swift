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
    ///
    /// The read's state is a `CacheReading` on the heap and its steps are synchronous methods
    /// of it: this function only awaits Redis between them, so that its frame stays small. The
    /// request's task keeps the high-water mark of its frames for as long as its connection
    /// lives, and every catch-up with something to read comes through here.
    @inline(never)
    func readCache(
        after revision: Int64, floor: Int64?, own: Set<Int64>, device: Device, limits: CatchUpLimits, form: EntryForm, keys: CacheKeys
    ) async throws -> CacheRead {
        let reading = reading(after: revision, floor: floor, own: own, device: device, limits: limits, form: form)
        if !beganFromMemory(reading) {
            let values = try await redis.mget(reading.firstKeys(keys))
            if let uncached = began(reading, cached: values) { return uncached }
        }
        while true {
            try await sendAloneWhereMissing(&reading.pending, &reading.values, reading: reading, keys: keys)
            // Runs the caller cannot take whole (missing, or holding its own change sets) go one by one: one more MGET for all of them.
            let broken = reading.brokenRuns()
            if !broken.isEmpty {
                let singles = reading.singles(of: broken)
                let fetched = try await fetchValues(reading.keys(of: singles.flatMap { $0 }), keys: keys)
                Self.expand(&reading.pending, &reading.values, broken: broken, into: singles, fetched: fetched)
                // Chained singles of a broken run may be missing too: the loop's first step again.
                continue
            }
            var index = 0
            taking: while true {
                switch reading.take(from: &index) {
                case .stop(let hole):
                    return try await ended(reading, hole: hole, keys: keys)
                case .split(let first, let size):
                    // Ending the page inside (or gone since): one by one, the pager decides where.
                    var singles = reading.singles(first: first, size: size)
                    var fetched = try await fetchValues(reading.keys(of: singles), keys: keys)
                    try await sendAloneWhereMissing(&singles, &fetched, reading: reading, keys: keys)
                    reading.insert(singles, fetched, at: index)
                case .taken:
                    break taking
                }
            }
            guard reading.nextChunk() else { return try await ended(reading, hole: nil, keys: keys) }
            reading.values = try await fetchValues(reading.keys(of: reading.pending), keys: keys)
        }
    }

    @inline(never)
    private func reading(after revision: Int64, floor: Int64?, own: Set<Int64>, device: Device, limits: CatchUpLimits, form: EntryForm) -> CacheReading {
        CacheReading(
            after: revision, floor: floor, own: own, device: device, limits: limits, form: form, knownHead: knownHead,
            averageBytes: averageBytesPerForm)
    }

    /// Starts the read from what this instance holds, when it holds every piece (its own
    /// commits of a moment ago): no round trip at all.
    @inline(never)
    private func beganFromMemory(_ reading: CacheReading) -> Bool {
        guard let known = stateForMemoryRead(floor: reading.floor), let held = recentValues.values(reading.keys(of: reading.pending)) else { return false }
        reading.begin(LogState(head: known.head, horizon: known.horizon), values: held)
        metrics.recordCache("memory_reads")
        return true
    }

    /// Starts the read from the first `MGET`; the read's result when the cache holds no head or horizon.
    @inline(never)
    private func began(_ reading: CacheReading, cached values: [ByteBuffer?]) -> CacheRead? {
        guard let state = reading.begin(cached: values) else { return reading.uncached() }
        remember(state)
        recentValues.fill(&reading.values, slots: reading.keys(of: reading.pending))
        return nil
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

    /// One cache read: what it was asked, the pieces it is reading and what it has taken.
    private final class CacheReading {
        let revision: Int64
        let floor: Int64?
        let own: Set<Int64>
        let device: Device
        let limits: CatchUpLimits
        let form: EntryForm
        /// The last revision the page may hold.
        let pageEnd: Int64
        /// Reading stops at the byte limit: a chunk holds about as many entries as the limit takes.
        let chunk: Int64
        /// The pieces read last, and their values.
        var pending: [Piece] = []
        var values: [ByteBuffer?] = []
        /// The cached state, once read.
        private(set) var state = LogState(head: 0, horizon: 0)
        /// Where the page may end: its end, or the head (or the caller's own commits, past it).
        private(set) var through: Int64 = 0
        var pager: CatchUpPager
        var read = ReadEntries()
        var authors: Set<Int64> = []
        /// The last revision taken.
        var position: Int64

        @inline(never)
        init(
            after revision: Int64, floor: Int64?, own: Set<Int64>, device: Device, limits: CatchUpLimits, form: EntryForm, knownHead: Int64,
            averageBytes: Double
        ) {
            self.revision = revision
            self.floor = floor
            self.own = own
            self.device = device
            self.limits = limits
            self.form = form
            pageEnd = Self.plus(revision, Int64(limits.maxChangeSets))
            chunk = Int64(max(16, min(limits.maxChangeSets, limits.maxBytes / max(64, Int(averageBytes)))))
            pager = CatchUpPager(limits: limits)
            position = revision
            // The range's end is a guess: the highest head this instance has seen.
            let guess = min(pageEnd, Self.plus(revision, chunk), max(revision, knownHead, floor ?? 0))
            if revision < guess { pending = pieces(revision + 1, guess) }
        }

        /// A device may send any maxRevision up to Int64.max (it is refused after this read): saturate, never trap.
        static func plus(_ a: Int64, _ b: Int64) -> Int64 { a.addingReportingOverflow(b).overflow ? Int64.max : a + b }

        // The steps are never inlined into `readCache`: an async function's frame holds the
        // locals of everything inlined into it.

        @inline(never)
        func keys(of pieces: [Piece]) -> [CacheSlot] { pieces.map(pieceKey) }

        /// The first `MGET`'s keys: the head, the horizon, then the pending pieces.
        @inline(never)
        func firstKeys(_ keys: CacheKeys) -> [String] { [keys.head, keys.horizon] + pending.map { keys.key(pieceKey($0)) } }

        /// The read of a cache that holds no head or horizon.
        @inline(never)
        func uncached() -> CacheRead { CacheRead(state: nil, entries: [], more: false, hole: Self.plus(revision, 1)) }

        /// The singles of a run, to read one by one.
        @inline(never)
        func singles(first: Int64, size: Int64) -> [Piece] { (first..<(first + size)).map { piece(.single($0)) } }

        /// Puts `singles` and their values before the pending piece at `index`.
        @inline(never)
        func insert(_ singles: [Piece], _ fetched: [ByteBuffer?], at index: Int) {
            pending.replaceSubrange(index..<index, with: singles)
            values.replaceSubrange(index..<index, with: fetched)
        }

        /// Starts from a state known without a read, with the pieces' values.
        @inline(never)
        func begin(_ state: LogState, values: [ByteBuffer?]) {
            self.state = state
            self.values = values
            through = min(pageEnd, max(state.head, floor ?? 0))
        }

        /// Starts from the first `MGET`: the head, the horizon, then the pieces. Nil when the
        /// cache holds no head or horizon.
        @inline(never)
        func begin(cached values: [ByteBuffer?]) -> LogState? {
            guard let head = values[0].flatMap({ Int64(String(buffer: $0)) }), let horizon = values[1].flatMap({ Int64(String(buffer: $0)) }) else {
                return nil
            }
            let state = LogState(head: head, horizon: horizon)
            begin(state, values: Array(values.dropFirst(2)))
            return state
        }

        /// The next chunk's pieces, when the page goes on past what was taken.
        @inline(never)
        func nextChunk() -> Bool {
            guard position < through else { return false }
            pending = pieces(position + 1, min(through, Self.plus(position, chunk)))
            return true
        }

        /// Whether there is more after the page, when it ends at `hole`.
        func more(hole: Int64?) -> Bool {
            hole == nil && (pager.full || position < max(state.head, floor ?? 0))
        }

        func key(_ number: Int64) -> CacheSlot {
            switch form {
            case .plain: own.contains(number) ? .author(number) : .entry(number)
            case .deflated: own.contains(number) ? .authorDeflated(number) : .deflated(number)
            }
        }

        /// A piece goes chained when the answer sends the public form of the revision before it
        /// just before it: not first in the answer, not after (or being) the caller's own.
        func piece(_ span: CachedRun.Span) -> Piece {
            let first = Piece(span: span, chained: false).first
            let chained = form == .deflated && first - 1 > revision && !own.contains(first - 1) && !own.contains(first)
            return Piece(span: span, chained: chained)
        }

        /// A gzip answer takes the longest aligned runs that fit the range and hold none of the caller's commits.
        func pieces(_ first: Int64, _ last: Int64) -> [Piece] {
            (form == .plain ? (first...last).map { CachedRun.Span.single($0) } : CachedRun.cover(first, last, excluding: own)).map(piece)
        }

        func pieceKey(_ piece: Piece) -> CacheSlot {
            switch (piece.span, piece.chained) {
            case (.single(let number), false): key(number)
            case (.single(let number), true): .chained(number)
            case (.run(let size, let index, _), false): .run(size: size, index: index)
            case (.run(let size, let index, _), true): .chainedRun(size: size, index: index)
            }
        }

        /// The pending runs the caller cannot take whole: missing, or holding its own change sets.
        @inline(never)
        func brokenRuns() -> [Int] {
            pending.indices.filter { index in
                guard case .run = pending[index].span else { return false }
                guard let value = values[index], let run = CachedRun.decode(value, chained: pending[index].chained) else { return true }
                return run.authors.contains(device.id)
            }
        }

        /// The singles each of the `broken` runs holds.
        @inline(never)
        func singles(of broken: [Int]) -> [[Piece]] {
            broken.map { index -> [Piece] in
                guard case .run(let size, _, let first) = pending[index].span else { return [] }
                return (first..<(first + size)).map { piece(.single($0)) }
            }
        }

        /// Takes the read pieces from `index` on into the page, as long as they fit.
        @inline(never)
        func take(from index: inout Int) -> Taken {
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
    /// all in `recentValues`: for a read through this instance's commits (`floor`: a writing
    /// request's own, or a batch whose cache write is under way), this instance's latest,
    /// however old (revisions another instance committed meanwhile, and a horizon the pruner
    /// moved, come with the device's next request, as if this one had been a moment earlier);
    /// for any other read, only a state read within `stateFreshFor`, the same a device at the
    /// head is answered from.
    private func stateForMemoryRead(floor: Int64?) -> LogState? {
        floor != nil ? knownState : freshState
    }

    /// The values this instance holds (`recentValues`) when it holds every one, or else an
    /// `MGET` of all of them, with what Redis lacks and the instance holds taken from there
    /// (`RecentValues.fill`).
    @inline(never)
    func fetchValues(_ slots: [CacheSlot], keys: CacheKeys) async throws -> [ByteBuffer?] {
        if let held = recentValues.values(slots) {
            metrics.recordCache("memory_reads")
            return held
        }
        var values = try await redis.mget(slots.map(keys.key))
        recentValues.fill(&values, slots: slots)
        return values
    }

    /// A chained change set that is missing (made only where the one before was at hand) goes
    /// alone instead: its plain fragment, in one more `MGET`, only then.
    @inline(never)
    private func sendAloneWhereMissing(
        _ pieces: inout [Piece], _ values: inout [ByteBuffer?], reading: CacheReading, keys: CacheKeys
    ) async throws {
        let missing = pieces.indices.filter { index in
            guard pieces[index].chained, case .single = pieces[index].span else { return false }
            return values[index].flatMap(CachedEntry.decodeChained) == nil
        }
        guard !missing.isEmpty else { return }
        let fetched = try await fetchValues(missing.map { reading.key(pieces[$0].first) }, keys: keys)
        for (index, value) in zip(missing, fetched) {
            pieces[index] = Piece(span: pieces[index].span, chained: false)
            values[index] = value
        }
    }

    /// The read, ended at `hole` (nil: the page is full, or at its end).
    @inline(never)
    private func ended(_ reading: CacheReading, hole: Int64?, keys: CacheKeys) async throws -> CacheRead {
        let more = reading.more(hole: hole)
        let state = reading.state
        var result: CacheRead
        if let finished = Self.finished(reading.read, head: state.head, horizon: state.horizon, hole: hole, more: more, own: reading.own, device: reading.device) {
            result = finished
        } else {
            result = try await finish(
                reading.read, head: state.head, horizon: state.horizon, hole: hole, more: more, own: reading.own, device: reading.device,
                limits: reading.limits, form: reading.form, keys: keys)
        }
        result.authors = reading.authors
        return result
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
