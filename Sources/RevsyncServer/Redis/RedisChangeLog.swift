import Crypto
import Foundation
import Logging
import NIOCore
import RevsyncGzip
import RevsyncRedis
import RevsyncRules
import Synchronization

/// The change log with Redis in front of PostgreSQL.
///
/// Every committed change set is written through after its COMMIT, and the cached
/// head only moves forward. A catch-up reads the head and the range from Redis and
/// assembles the response from the cached bytes; holes (evictions, a flush, a
/// crash between COMMIT and the cache write) are read from PostgreSQL once and
/// written back. When Redis fails, every call falls back to PostgreSQL.
public final class RedisChangeLog: ChangeLog {
    let postgres: PostgresChangeLog
    let redis: RedisClient
    let settings: ServerSettings
    let metrics: ServerMetrics
    let logger: Logger
    let health: CacheHealth
    let backfills = BackfillCoordinator()
    /// This instance's latest commits' values, so that a catch-up inside them skips Redis.
    let recentValues: RecentValues
    /// Set once the database's instance id is known (after migrations).
    let keys = Mutex<CacheKeys?>(nil)
    /// A running average of entry sizes (all five values), to fit the window into `cacheMaxBytes`.
    private let averageEntryBytes = Mutex<Double>(1024)
    /// The public JSON of this instance's last commit, which the next batch's first entry is
    /// compressed after (`ChainedFragment`) when it follows on.
    private let lastPublic = Mutex<(revision: Int64, body: ByteBuffer)?>(nil)
    /// The zlib stream every commit's entries and runs are compressed with. Setting one up
    /// (`deflateInit2`, 256 KiB of state) cost a lone writer's commit about as much as all
    /// its compressing; commits are published one at a time, in turn, so nobody waits for it.
    private let commitDeflater = Mutex(Deflater())
    /// When the reads that found the cache ahead of PostgreSQL began, the latest since the
    /// last `takeRewindFound` (one begun after the instance took its id is the one that counts).
    private let rewindFound = Mutex<ContinuousClock.Instant?>(nil)
    /// The last revision of the batch whose cache write is under way (`didCommit`), until
    /// Redis has answered it. A catch-up reads at least through it whatever the cached head
    /// says: the answers of the batch's own requests go out before the write lands, and a
    /// device asking this instance right after one of them must find that commit too.
    /// Nil once Redis has answered, either way (a failed write leaves it to the reconciler and
    /// to PostgreSQL), and when the instance forgets the line it saw (`forgetLine`).
    private let unpublishedHead = Mutex<Int64?>(nil)
    /// The head and horizon as this instance last saw them (reads, and its own commits, which
    /// only raise the head), and when it last read them. The head is where a read expects the
    /// log to end.
    private let recentState = Mutex<(state: LogState, readAt: ContinuousClock.Instant?)>((LogState(head: 0, horizon: 0), nil))
    /// How long a state read answers for without asking Redis again: a device at the head is
    /// told so, and a writing request's `maxRevision` is checked against it. Within one
    /// instance its own commits move the head at once; another instance's commit (or the
    /// pruner's horizon) may go unseen this long, as if the request had come that much earlier.
    static let stateFreshFor: Duration = .milliseconds(2)

    var knownHead: Int64 { recentState.withLock { $0.state.head } }

    /// The head and horizon as this instance last saw them, however long ago.
    var knownState: LogState { recentState.withLock { $0.state } }

    /// The state read within `stateFreshFor`, if any.
    var freshState: LogState? {
        recentState.withLock { recent in
            guard let readAt = recent.readAt, ContinuousClock.now - readAt < Self.stateFreshFor else { return nil }
            return recent.state
        }
    }

    func remember(_ state: LogState) {
        let now = ContinuousClock.now
        recentState.withLock { recent in
            // A read that started before a commit may finish after it: never move the head back.
            recent = (LogState(head: max(state.head, recent.state.head), horizon: state.horizon), now)
        }
    }

    /// A head another instance announced (`CommitFeed`): reads expect the log to reach it, and
    /// a device at the old head is no longer told "nothing new" from the last read's state.
    func heard(head: Int64) {
        recentState.withLock { recent in
            recent.state = LogState(head: max(recent.state.head, head), horizon: recent.state.horizon)
        }
    }

    /// About the bytes of one entry in one form, to size a read's chunks.
    var averageBytesPerForm: Double { averageEntryBytes.withLock { $0 } / 3 }

    /// Raises a counter key only if the new value is larger: several instances and late writes never move it back.
    static let raiseScript = """
        local current = tonumber(redis.call('GET', KEYS[1]) or '-1')
        local proposed = tonumber(ARGV[1])
        if proposed > current then redis.call('SET', KEYS[1], ARGV[1]) return proposed end
        return current
        """

    init(postgres: PostgresChangeLog, redis: RedisClient, settings: ServerSettings, metrics: ServerMetrics, logger: Logger) {
        self.postgres = postgres
        self.redis = redis
        self.settings = settings
        self.metrics = metrics
        self.logger = logger
        self.health = CacheHealth(logger: logger, metrics: metrics)
        recentValues = RecentValues(capacity: settings.cacheMemoryRevisions)
    }

    /// The keys to use now, or nil to go straight to PostgreSQL. Requests use Redis only while
    /// it is up; the background reads probe it when it is down (`CacheHealth`).
    private var usableKeys: CacheKeys? {
        guard let keys = keys.withLock({ $0 }), health.isUp else { return nil }
        return keys
    }

    /// The window of recent revisions kept, shrunk to fit the byte budget.
    var window: Int64 {
        let average = averageEntryBytes.withLock { $0 }
        return max(1, min(settings.cacheWindow, Int64(Double(settings.cacheMaxBytes) / max(average, 1))))
    }

    // MARK: Startup and reconciliation

    /// Learns the database's instance id and brings Redis in line with PostgreSQL:
    /// a cache that is ahead of the database (restored database) is dropped.
    func prepare() async throws {
        let instance = try await postgres.instance()
        let keys = CacheKeys(prefix: settings.cachePrefix, instance: instance)
        self.keys.withLock { $0 = keys }
        do {
            let started = ContinuousClock.now
            let state = try await postgres.state()
            let cachedHead = try await redis.get(keys.head).flatMap { Int64(String(buffer: $0)) }
            if let cachedHead, cachedHead > state.head {
                logger.warning("the Redis cache is ahead of PostgreSQL; dropping it", metadata: ["cached": "\(cachedHead)", "head": "\(state.head)"])
                found(since: started)
                try await dropAll(keys)
            }
            try await raise(state, keys)
            health.succeeded()
        } catch let error as RedisError {
            health.failed(error)
        }
    }

    /// Moves the cached head and horizon up to PostgreSQL's (never down), and drops the
    /// cache when it is ahead of PostgreSQL or holds an entry PostgreSQL has differently
    /// (the database was restored from a backup, or failed over and lost its tail).
    /// Returns what it read of PostgreSQL, when it did.
    ///
    /// Two round trips when nothing moved: one script reads the cached head, horizon and head
    /// entry, one query reads PostgreSQL's (`HeadReading`). A raise follows only when the
    /// cache is behind; it only ever raises, so one skipped because the cache was level is
    /// one that would have changed nothing (a flush just after the read is raised next time).
    @discardableResult
    func reconcile() async -> HeadReading? {
        guard let keys = keys.withLock({ $0 }) else { return nil }
        var read: HeadReading? = nil
        do {
            guard health.mayTry() else { return nil }
            // The cached head is read first: it moves only after a COMMIT, so PostgreSQL's
            // head read after it is at least as high unless the database went back.
            let started = ContinuousClock.now
            let cached = try await cachedHead(keys)
            // Redis answered: what fails from here on may be PostgreSQL's.
            health.succeeded()
            let reading = try await postgres.readHead(digestOf: cached.entry == nil ? nil : cached.head)
            read = reading
            let state = reading.state
            var dropped = false
            if let cachedHead = cached.head, cachedHead > 0 {
                let matches = cachedHead <= state.head ? entryMatches(cached.entry, digest: reading.digest) : false
                if !matches {
                    logger.warning(
                        "the Redis cache does not match PostgreSQL (ahead of it, or an entry differs); dropping it",
                        metadata: ["cached": "\(cachedHead)", "head": "\(state.head)"])
                    found(since: started)
                    try await dropAll(keys)
                    dropped = true
                }
            }
            if dropped || (cached.head ?? -1) < state.head || (cached.horizon ?? -1) < state.horizon {
                try await raise(state, keys)
            }
            health.succeeded()
        } catch let error as RedisError {
            health.failed(error)
        } catch {
            logger.debug("cache reconciliation skipped", metadata: ["error": "\(error)"])
        }
        return read
    }

    /// The cached head and horizon, and the public entry at that head, in one round trip.
    private func cachedHead(_ keys: CacheKeys) async throws -> (head: Int64?, horizon: Int64?, entry: ByteBuffer?) {
        let reply = try await redis.eval(script: Self.headReadScript, keys: [keys.head, keys.horizon], args: [keys.entryPrefix])
        guard let parts = reply.arrayValue, parts.count == 3 else { throw RedisError.unexpectedReply(expected: "an array of 3 values", got: reply) }
        func number(_ value: RedisValue) -> Int64? { value.stringValue.flatMap { Int64($0) } }
        return (number(parts[0]), number(parts[1]), parts[2].bufferValue)
    }

    /// The head, the horizon and the public entry at the head (ARGV[1] is the entries' key
    /// prefix: the entry's key depends on the head, so it cannot be passed in KEYS; one
    /// Redis holds every key of a prefix, as everywhere in this cache).
    static let headReadScript = """
        local head = redis.call('GET', KEYS[1])
        local entry = false
        if head then entry = redis.call('GET', ARGV[1] .. head) end
        return {head, redis.call('GET', KEYS[2]), entry}
        """

    /// Whether the cached entry at the head is the one PostgreSQL has (true when either side lacks it).
    private func entryMatches(_ value: ByteBuffer?, digest stored: String?) -> Bool {
        guard let value, let cached = CachedEntry.decodePublic(value), let stored else { return true }
        let digest = Insecure.MD5.hash(data: Array(cached.body.readableBytesView)).map { String(format: "%02x", $0) }.joined()
        return digest == stored
    }

    private func raise(_ state: LogState, _ keys: CacheKeys) async throws {
        _ = try await redis.eval(script: Self.raiseScript, keys: [keys.head], args: [String(state.head)])
        _ = try await redis.eval(script: Self.raiseScript, keys: [keys.horizon], args: [String(state.horizon)])
    }

    /// The database's history id changed (`HistoryWatch`): what this instance and Redis hold
    /// may be of revisions the database no longer has and numbers again. Dropped.
    func forgetHistory() async {
        forgetLine()
        guard let keys = keys.withLock({ $0 }), health.mayTry() else { return }
        do {
            try await dropAll(keys)
            health.succeeded()
            try await raise(try await postgres.state(), keys)
        } catch {
            if error is RedisError { health.failed(error) }
            logger.warning("the Redis cache could not be dropped after the history id changed; the reconciler checks it again", metadata: ["error": "\(error)"])
        }
    }

    /// A rewind found here (a cache ahead of PostgreSQL, or an entry it has differently) since
    /// the last call, as when the reads that found it began: `HistoryWatch` renews the history
    /// id, unless it took a new one after that (the cache was of the line it replaced).
    func takeRewindFound() -> ContinuousClock.Instant? {
        rewindFound.withLock { found in
            defer { found = nil }
            return found
        }
    }

    private func found(since started: ContinuousClock.Instant) {
        rewindFound.withLock { found in found = max(found ?? started, started) }
    }

    /// Forgets what this instance kept of the log in memory: its latest commits' values, the
    /// last public form the next commit would be compressed after (a chained fragment made
    /// after a revision the database numbered again would inflate to garbage after the new
    /// one), and the head it saw (which only rises otherwise).
    private func forgetLine() {
        recentValues.removeAll()
        lastPublic.withLock { $0 = nil }
        recentState.withLock { $0 = (LogState(head: 0, horizon: 0), nil) }
        unpublishedHead.withLock { $0 = nil }
    }

    private func dropAll(_ keys: CacheKeys) async throws {
        // Kept values are the dropped cache's: they may no longer be the log's.
        forgetLine()
        var cursor = "0"
        repeat {
            let reply = try await redis.command(["SCAN", cursor, "MATCH", keys.prefix + ":*", "COUNT", "10000"])
            guard let parts = reply.arrayValue, parts.count == 2, let next = parts[0].stringValue else { break }
            cursor = next
            let found = (parts[1].arrayValue ?? []).compactMap(\.stringValue)
            if !found.isEmpty { _ = try await redis.del(found) }
        } while cursor != "0"
    }

    // MARK: ChangeLog

    public func state() async throws -> LogState {
        guard let keys = usableKeys else { return try await postgres.state() }
        do {
            let values = try await redis.mget([keys.head, keys.horizon])
            health.succeeded()
            if let head = values[0].flatMap({ Int64(String(buffer: $0)) }), let horizon = values[1].flatMap({ Int64(String(buffer: $0)) }) {
                remember(LogState(head: head, horizon: horizon))
                return LogState(head: head, horizon: horizon)
            }
        } catch let error as RedisError {
            health.failed(error)
            return try await postgres.state()
        }
        // Flushed or never written: PostgreSQL knows, and the cache learns it.
        return try await authoritativeState()
    }

    /// A writing request checks its `maxRevision` against this; read once every couple of
    /// milliseconds, it spares a busy instance a Redis round trip per request.
    public func recentState() async throws -> LogState {
        if let fresh = freshState { return fresh }
        return try await state()
    }

    public func authoritativeState() async throws -> LogState {
        let state = try await postgres.state()
        remember(state)
        if let keys = usableKeys {
            do {
                try await raise(state, keys)
                health.succeeded()
            } catch {
                health.failed(error)
            }
        }
        return state
    }

    public func entries(
        after revision: Int64, through head: Int64, for device: Device, limits: CatchUpLimits, form: EntryForm = .plain, own: Set<Int64> = []
    ) async throws -> CatchUpPage {
        guard let keys = usableKeys else { return try await postgres.entries(after: revision, through: head, for: device, limits: limits) }
        guard head > revision else { return CatchUpPage(entries: [], more: false, source: "redis") }
        let read: CacheRead
        do {
            read = try await readCache(after: revision, floor: head, own: own, device: device, limits: limits, form: form, keys: keys)
            health.succeeded()
        } catch let error as RedisError {
            health.failed(error)
            return try await postgres.entries(after: revision, through: head, for: device, limits: limits)
        }
        return try await complete(read, after: revision, through: max(head, read.state?.head ?? head), device: device, limits: limits, form: form, keys: keys)
    }

    /// Usually one round trip: the cached head and horizon and the page after `revision`
    /// through that head, read together (`readCache`).
    public func catchUp(
        after revision: Int64, for device: Device, limits: CatchUpLimits, form: EntryForm
    ) async throws -> (state: LogState, page: CatchUpPage) {
        // Each step is a function of its own, never inlined: an async function's frame holds
        // the locals of everything inlined into it, and every catch-up comes through here on
        // the request's task (which keeps its frames' high-water mark while its connection lives).
        switch firstStep(after: revision) {
        case .answered(let state, let page): return (state, page)
        case .postgres: return try await catchUpWithoutCache(after: revision, for: device, limits: limits, form: form)
        case .read(let keys): return try await catchUpFromCache(after: revision, for: device, limits: limits, form: form, keys: keys)
        }
    }

    /// The catch-up from a cache read, the usual way.
    @inline(never)
    private func catchUpFromCache(
        after revision: Int64, for device: Device, limits: CatchUpLimits, form: EntryForm, keys: CacheKeys
    ) async throws -> (state: LogState, page: CatchUpPage) {
        let read: CacheRead
        let floor = unpublished(after: revision)
        do {
            read = try await readCache(after: revision, floor: floor, own: [], device: device, limits: limits, form: form, keys: keys)
        } catch let error as RedisError {
            failed(error)
            return try await catchUpWithoutCache(after: revision, for: device, limits: limits, form: form)
        }
        switch page(of: read, after: revision, floor: floor) {
        case .answered(let state, let page): return (state, page)
        case .fromPostgres: return try await catchUpFromPostgres(after: revision, for: device, limits: limits, form: form)
        case .withHole(let state):
            return (state, try await complete(read, after: revision, through: state.head, device: device, limits: limits, form: form, keys: keys))
        }
    }

    /// PostgreSQL's catch-up, when the cache is off or failing.
    @inline(never)
    private func catchUpWithoutCache(
        after revision: Int64, for device: Device, limits: CatchUpLimits, form: EntryForm
    ) async throws -> (state: LogState, page: CatchUpPage) {
        try await postgres.catchUp(after: revision, for: device, limits: limits, form: form)
    }

    /// Where a catch-up starts.
    private enum FirstStep {
        /// The cache is off or failing: PostgreSQL answers.
        case postgres
        /// A device at the head, as this instance saw it a moment ago: nothing to read.
        case answered(LogState, CatchUpPage)
        case read(CacheKeys)
    }

    @inline(never)
    private func firstStep(after revision: Int64) -> FirstStep {
        guard let keys = usableKeys else { return .postgres }
        if let fresh = freshState, fresh.head == revision { return .answered(fresh, CatchUpPage(entries: [], more: false, source: "redis")) }
        return .read(keys)
    }

    @inline(never)
    private func failed(_ error: RedisError) {
        health.failed(error)
    }

    /// What a cache read gives a catch-up.
    private enum ReadPage {
        case answered(LogState, CatchUpPage)
        /// The cache was flushed or never written: PostgreSQL knows, and the cache learns it.
        case fromPostgres
        /// The cache's page has a hole (`complete` fills it).
        case withHole(LogState)
    }

    /// This instance's commit past `revision` that the cache may not hold yet, if any: the
    /// catch-up reads through it, from this instance's copy (`RecentValues`). Without a copy
    /// (`REVSYNC_CACHE_MEMORY_REVISIONS=0`) it would read PostgreSQL, and write back to Redis,
    /// what Redis is about to hold: the catch-up then answers from the cache as it stands.
    @inline(never)
    private func unpublished(after revision: Int64) -> Int64? {
        guard recentValues.capacity > 0 else { return nil }
        return unpublishedHead.withLock { head in head.flatMap { $0 > revision ? $0 : nil } }
    }

    /// - Parameter floor: this instance's commit the read went through, past the cached head if Redis lacks it yet.
    @inline(never)
    private func page(of read: CacheRead, after revision: Int64, floor: Int64?) -> ReadPage {
        health.succeeded()
        guard let cached = read.state else { return .fromPostgres }
        let state = LogState(head: max(cached.head, floor ?? 0), horizon: cached.horizon)
        guard revision >= state.horizon, revision < state.head else { return .answered(state, CatchUpPage(entries: [], more: false, source: "redis")) }
        // Most pages are whole: `complete`'s frame only for those with a hole.
        if read.hole == nil { return .answered(state, wholePage(read)) }
        return .withHole(state)
    }

    /// The cache's page of a read without a hole (counted as hits).
    @inline(never)
    private func wholePage(_ read: CacheRead) -> CatchUpPage {
        metrics.recordCache("hits", count: read.entries.count)
        return CatchUpPage(entries: read.entries, more: read.more, source: "redis", authors: read.authors)
    }

    /// The cache was flushed or never written: PostgreSQL knows, and the cache learns it.
    @inline(never)
    private func catchUpFromPostgres(
        after revision: Int64, for device: Device, limits: CatchUpLimits, form: EntryForm
    ) async throws -> (state: LogState, page: CatchUpPage) {
        let state = try await authoritativeState()
        guard revision >= state.horizon, revision < state.head else { return (state, CatchUpPage(entries: [], more: false, source: "redis")) }
        return (state, try await entries(after: revision, through: state.head, for: device, limits: limits, form: form, own: []))
    }

    /// The cache's page, with a hole (eviction, a flush, a crash between COMMIT and the cache
    /// write) filled from PostgreSQL and written back, and the page going on from there.
    @inline(never)
    private func complete(
        _ read: CacheRead, after revision: Int64, through head: Int64, device: Device, limits: CatchUpLimits, form: EntryForm,
        keys: CacheKeys
    ) async throws -> CatchUpPage {
        guard let hole = read.hole else { return wholePage(read) }
        metrics.recordCache("hits", count: read.entries.count)
        var authors = read.authors
        var pager = CatchUpPager(limits: limits)
        var entries: [LogEntry] = []
        for entry in read.entries where pager.admit(size: entry.size) { entries.append(entry) }
        let last = CatchUpRules.lastWanted(after: revision, through: head, limits: limits)
        let rest = CatchUpLimits(maxChangeSets: limits.maxChangeSets - entries.count, maxBytes: max(0, limits.maxBytes - pager.bytes))
        let filled = try await backfill(from: hole, through: last, limits: rest, keys: keys, head: head)
        metrics.recordCache("misses", count: filled.count)
        var expected = hole
        for cached in filled {
            // A revision PostgreSQL no longer has either: behind the horizon, or a hole the page stops before.
            guard cached.entry.revision == expected else { break }
            let entry = cached.logEntry(for: device.id, form: form)
            guard pager.admit(size: entry.size) else { return CatchUpPage(entries: entries, more: true, source: "mixed", authors: authors) }
            entries.append(entry)
            authors.insert(cached.entry.deviceId)
            expected += 1
        }
        if expected <= last {
            try CatchUpRules.checkMissing(expected, horizon: try await postgres.state().horizon, pageIsEmpty: entries.isEmpty)
            return CatchUpPage(entries: entries, more: false, source: "mixed", authors: authors)
        }
        return CatchUpPage(entries: entries, more: last < head, source: "mixed", authors: authors)
    }

    /// Reads revisions from `first` on from PostgreSQL (once, however many requests miss them)
    /// and writes them back, compressed, if they are still inside the window.
    private func backfill(from first: Int64, through last: Int64, limits: CatchUpLimits, keys: CacheKeys, head: Int64) async throws -> [CachedEntry] {
        let postgres = self.postgres, metrics = self.metrics
        let entries = try await backfills.load(BackfillCoordinator.Range(first: first, last: last, limits: limits)) {
            metrics.recordCache("backfills")
            return Self.cachedEntries(try await postgres.committedEntries(from: first, through: last, limits: limits), previous: nil)
        }
        let oldest = head - window
        let kept = entries.filter { $0.entry.revision > oldest }
        // With the runs the filled range holds whole, so that later gzip answers take them.
        let values = kept.flatMap { $0.values() } + (await runValues(kept, previous: nil, keys: keys, ofCommit: false))
        let commands = values.map { $0.setCommand(keys) }
        guard !commands.isEmpty else { return entries }
        do {
            _ = try await redis.pipeline(commands)
        } catch {
            health.failed(error)
        }
        return entries
    }

    public func authorEntries(_ revisions: [Int64], for device: Device) async throws -> [LogEntry] {
        try await postgres.authorEntries(revisions, for: device)
    }

    /// Compresses the entries and keeps their values (`recentValues`), which is all this
    /// instance's reads need, and sends them to Redis for the other instances: the pipeline's
    /// replies are what it returns.
    public func didCommit(_ entries: [CommittedEntry]) async -> CommitPublication {
        guard let first = entries.first, let last = entries.last else { return .done }
        recentState.withLock { recent in
            recent.state = LogState(head: max(recent.state.head, last.revision), horizon: recent.state.horizon)
        }
        // Compressed only when Redis takes them: with the cache off or down, nobody would read them.
        guard let keys = usableKeys else { return .done }
        let previous = await publicBody(first.revision - 1, keys: keys)
        let cached = commitDeflater.withLock { Self.cachedEntries(entries, previous: previous.map { (first.revision - 1, $0) }, with: $0) }
        lastPublic.withLock { $0 = (last.revision, last.body) }
        for entry in cached {
            averageEntryBytes.withLock { $0 = $0 * 0.99 + Double(entry.cachedBytes) * 0.01 }
        }
        var commands: [[ByteBuffer]] = []
        var held: [CacheValue] = []
        for entry in cached {
            let values = entry.values()
            held += values
            commands += values.map { $0.setCommand(keys) }
            let evicted = entry.entry.revision - window
            guard evicted > 0 else { continue }
            var victims = keys.all(evicted)
            for size in CachedRun.sizes {
                if let run = CachedRun.ending(at: evicted, size: size) { victims += [keys.run(size, run), keys.chainedRun(size, run)] }
            }
            commands.append([ByteBuffer(string: "DEL")] + victims.map { ByteBuffer(string: $0) })
        }
        let runs = await runValues(cached, previous: previous, keys: keys, ofCommit: true)
        commands += runs.map { $0.setCommand(keys) }
        recentValues.store(held + runs, newest: last.revision)
        // The entries first, then the head, in one round trip for the whole batch: a reader
        // that sees the new head finds the entries (or backfills them).
        commands.append(["EVAL", Self.raiseScript, "1", keys.head, String(last.revision)].map { ByteBuffer(string: $0) })
        // The raised head and the horizon, as a state read would have them: the batch's own
        // requests, answered from `recentValues`, and the writes that follow within
        // `stateFreshFor` need no read of their own.
        commands.append(["GET", keys.horizon].map { ByteBuffer(string: $0) })
        // Then the other instances' waiters are woken (`CommitFeed`): they read the entries just written.
        commands.append(["PUBLISH", keys.commits, String(last.revision)].map { ByteBuffer(string: $0) })
        let replies: EventLoopFuture<[RedisValue]>
        // Batches are published one at a time, in commit order (`PublicationTurn`): one write at most is under way.
        unpublishedHead.withLock { $0 = last.revision }
        do {
            replies = try await redis.submit(pipeline: commands)
        } catch {
            published(last.revision)
            health.failed(error)
            return .done
        }
        return CommitPublication(replies.map { [self] replies in
            metrics.recordCache("writes", count: entries.count)
            health.succeeded()
            if replies.count >= 3, case .integer(let head) = replies[replies.count - 3],
                let horizon = replies[replies.count - 2].stringValue.flatMap({ Int64($0) })
            {
                remember(LogState(head: head, horizon: horizon))
            }
        }.flatMapErrorThrowing { [health] error in health.failed(error) }.always { [self] _ in published(last.revision) })
    }

    /// The cache write of the batch ending at `revision` has ended, either way: catch-ups read
    /// the cache as it stands again (unless a later batch's write is under way already).
    private func published(_ revision: Int64) {
        unpublishedHead.withLock { if $0 == revision { $0 = nil } }
    }

    /// Compresses `entries`, each chained after the one before it where that one is at hand
    /// (`previous`, then the earlier entries of the list while their revisions follow on).
    static func cachedEntries(
        _ entries: [CommittedEntry], previous: (revision: Int64, body: ByteBuffer)?, with deflater: Deflater = Deflater()
    ) -> [CachedEntry] {
        var before = previous
        return entries.map { entry in
            let chainedAfter = before.flatMap { $0.revision == entry.revision - 1 ? $0.body : nil }
            before = (entry.revision, entry.body)
            return CachedEntry(entry, previous: chainedAfter, with: deflater)
        }
    }

    /// The public JSON of `revision`, to chain the next one after: this instance's last commit
    /// when that was it (one instance: always), otherwise one `GET`; nil when Redis lacks it.
    private func publicBody(_ revision: Int64, keys: CacheKeys) async -> ByteBuffer? {
        guard revision > 0 else { return nil }
        if let known = lastPublic.withLock({ $0 }), known.revision == revision { return known.body }
        do {
            guard let value = try await redis.get(keys.entry(revision)) else { return nil }
            return CachedEntry.decodePublic(value)?.body
        } catch {
            // The commit's own write fails next anyway; said now, the batches after it skip Redis.
            health.failed(error)
            return nil
        }
    }

    /// The runs `batch` completes (`CachedRun`), compressed alone and after the revision
    /// before them. For a commit (`ofCommit`), a run's change sets before the batch come from
    /// Redis in one `MGET`, only when the batch ends a run, and the commits' zlib stream
    /// compresses them; for a backfill, which may run meanwhile, only runs the batch holds
    /// whole are made, with a stream of their own. `previous` is the public JSON of the
    /// revision before the batch, if known. A run that cannot be made (an entry missing, Redis
    /// failing) is left out; its change sets then go one by one.
    private func runValues(_ batch: [CachedEntry], previous: ByteBuffer?, keys: CacheKeys, ofCommit: Bool) async -> [CacheValue] {
        var ends: [(size: Int64, run: Int64, first: Int64, last: Int64)] = []
        for entry in batch {
            let last = entry.entry.revision
            for size in CachedRun.sizes {
                if let run = CachedRun.ending(at: last, size: size) { ends.append((size, run, last - size + 1, last)) }
            }
        }
        guard !ends.isEmpty, let first = batch.first?.entry.revision else { return [] }
        var bodies: [Int64: (device: Int64, body: ByteBuffer)] = [:]
        for entry in batch { bodies[entry.entry.revision] = (entry.entry.deviceId, entry.entry.body) }
        // The members, and the revision before each run (its dictionary), which `previous` may already be.
        let memberRevisions = Set(ends.flatMap { $0.first...$0.last })
        let dictionaries = Set(ends.map { $0.first - 1 }).subtracting(previous == nil ? [] : [first - 1])
        let wanted = memberRevisions.union(dictionaries).subtracting(bodies.keys).filter { $0 > 0 }.sorted()
        if ofCommit && !wanted.isEmpty {
            let values: [ByteBuffer?]
            do {
                values = try await fetchValues(wanted.map { .entry($0) }, keys: keys)
            } catch {
                health.failed(error)
                return []
            }
            for (number, value) in zip(wanted, values) {
                if let value, let decoded = CachedEntry.decodePublic(value) { bodies[number] = decoded }
            }
        }
        let compress = { (deflater: Deflater) -> [CacheValue] in
            var values: [CacheValue] = []
            for end in ends {
                let members = (end.first...end.last).compactMap { bodies[$0] }
                guard members.count == Int(end.size) else { continue }
                values.append(CacheValue(slot: .run(size: end.size, index: end.run), value: CachedRun(bodies: members, with: deflater).value))
                if let before = bodies[end.first - 1]?.body ?? (end.first == first ? previous : nil) {
                    let chained = CachedRun(bodies: members, after: before, with: deflater)
                    values.append(CacheValue(slot: .chainedRun(size: end.size, index: end.run), value: chained.value))
                }
            }
            return values
        }
        return ofCommit ? commitDeflater.withLock { compress($0) } : compress(Deflater(level: CachedRun.level))
    }
}
