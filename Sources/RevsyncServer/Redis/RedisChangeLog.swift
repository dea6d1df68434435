import Crypto
import Foundation
import Logging
import NIOCore
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
    /// Set once the database's instance id is known (after migrations).
    let keys = Mutex<CacheKeys?>(nil)
    /// A running average of entry sizes, to fit the window into `cacheMaxBytes`.
    private let averageEntryBytes = Mutex<Double>(1024)

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
    }

    /// The keys to use now, or nil to go straight to PostgreSQL.
    private var usableKeys: CacheKeys? {
        guard let keys = keys.withLock({ $0 }), health.shouldTry else { return nil }
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
            let state = try await postgres.state()
            let cachedHead = try await redis.get(keys.head).flatMap { Int64(String(buffer: $0)) }
            if let cachedHead, cachedHead > state.head {
                logger.warning("the Redis cache is ahead of PostgreSQL; dropping it", metadata: ["cached": "\(cachedHead)", "head": "\(state.head)"])
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
    func reconcile() async {
        guard let keys = keys.withLock({ $0 }) else { return }
        do {
            guard health.shouldTry else { return }
            // The cached head is read first: it moves only after a COMMIT, so PostgreSQL's
            // head read after it is at least as high unless the database went back.
            let cachedHead = try await redis.get(keys.head).flatMap { Int64(String(buffer: $0)) }
            let state = try await postgres.state()
            if let cachedHead, cachedHead > 0 {
                let matches = try await cachedHead <= state.head ? entryMatches(cachedHead, keys) : false
                if !matches {
                    logger.warning(
                        "the Redis cache does not match PostgreSQL (ahead of it, or an entry differs); dropping it",
                        metadata: ["cached": "\(cachedHead)", "head": "\(state.head)"])
                    try await dropAll(keys)
                }
            }
            try await raise(state, keys)
            health.succeeded()
        } catch let error as RedisError {
            health.failed(error)
        } catch {
            logger.debug("cache reconciliation skipped", metadata: ["error": "\(error)"])
        }
    }

    /// Whether the cached entry at `revision` is the one PostgreSQL has (true when either side lacks it).
    private func entryMatches(_ revision: Int64, _ keys: CacheKeys) async throws -> Bool {
        guard let value = try await redis.get(keys.entry(revision)), let cached = CachedEntry.decodePublic(value),
            let stored = try await postgres.bodyDigest(revision)
        else { return true }
        let digest = Insecure.MD5.hash(data: Array(cached.body.readableBytesView)).map { String(format: "%02x", $0) }.joined()
        return digest == stored
    }

    private func raise(_ state: LogState, _ keys: CacheKeys) async throws {
        _ = try await redis.eval(script: Self.raiseScript, keys: [keys.head], args: [String(state.head)])
        _ = try await redis.eval(script: Self.raiseScript, keys: [keys.horizon], args: [String(state.horizon)])
    }

    private func dropAll(_ keys: CacheKeys) async throws {
        var cursor = "0"
        repeat {
            let reply = try await redis.command(["SCAN", cursor, "MATCH", keys.prefix + ":*", "COUNT", "1000"])
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
                return LogState(head: head, horizon: horizon)
            }
        } catch let error as RedisError {
            health.failed(error)
            return try await postgres.state()
        }
        // Flushed or never written: PostgreSQL knows, and the cache learns it.
        return try await authoritativeState()
    }

    public func authoritativeState() async throws -> LogState {
        let state = try await postgres.state()
        if let keys = usableKeys {
            do {
                try await raise(state, keys)
            } catch {
                health.failed(error)
            }
        }
        return state
    }

    public func entries(
        after revision: Int64, through head: Int64, for device: Device, limits: CatchUpLimits, authored: [Int64: ByteBuffer] = [:]
    ) async throws -> CatchUpPage {
        guard let keys = usableKeys else { return try await postgres.entries(after: revision, through: head, for: device, limits: limits) }
        let last = CatchUpRules.lastWanted(after: revision, through: head, limits: limits)
        guard last > revision else { return CatchUpPage(entries: [], more: false, source: "redis") }
        let wanted = Array((revision + 1)...last)
        var bodies: [Int64: (device: Int64, body: ByteBuffer)] = [:]
        // The requester's own change sets go to it in their author form; those it just committed it holds.
        var authorBodies: [Int64: ByteBuffer] = [:]
        for (number, body) in authored where number > revision && number <= last {
            bodies[number] = (device.id, body)
            authorBodies[number] = body
        }
        do {
            let unknown = wanted.filter { authored[$0] == nil }
            for (number, value) in zip(unknown, try await redis.mget(unknown.map(keys.entry))) {
                if let value, let decoded = CachedEntry.decodePublic(value) { bodies[number] = decoded }
            }
            let own = unknown.filter { bodies[$0]?.device == device.id }
            if !own.isEmpty {
                for (number, value) in zip(own, try await redis.mget(own.map(keys.author))) where value != nil {
                    authorBodies[number] = value
                }
            }
            health.succeeded()
        } catch let error as RedisError {
            health.failed(error)
            return try await postgres.entries(after: revision, through: head, for: device, limits: limits)
        }
        let missing = wanted.filter { number in
            guard let found = bodies[number] else { return true }
            return found.device == device.id && authorBodies[number] == nil
        }
        metrics.recordCache("hits", count: wanted.count - missing.count)
        metrics.recordCache("misses", count: missing.count)
        if !missing.isEmpty {
            for entry in try await backfill(missing, keys: keys, head: head) {
                bodies[entry.revision] = (entry.deviceId, entry.body)
                authorBodies[entry.revision] = entry.authorBody
            }
        }

        let source = missing.isEmpty ? "redis" : "mixed"
        var pager = CatchUpPager(limits: limits)
        var entries: [LogEntry] = []
        for number in wanted {
            // A revision PostgreSQL no longer has either: behind the horizon, or a hole the page stops before.
            guard let found = bodies[number], let body = found.device == device.id ? authorBodies[number] : found.body else {
                try CatchUpRules.checkMissing(number, horizon: try await postgres.state().horizon, pageIsEmpty: entries.isEmpty)
                return CatchUpPage(entries: entries, more: false, source: "mixed")
            }
            guard pager.admit(size: body.readableBytes) else { return CatchUpPage(entries: entries, more: true, source: source) }
            entries.append(LogEntry(revision: number, bytes: body))
        }
        return CatchUpPage(entries: entries, more: last < head, source: source)
    }

    /// Reads missing revisions from PostgreSQL (once, however many requests miss them) and writes them back.
    private func backfill(_ missing: [Int64], keys: CacheKeys, head: Int64) async throws -> [CommittedEntry] {
        let postgres = self.postgres, metrics = self.metrics
        let entries = try await backfills.load(missing) {
            metrics.recordCache("backfills")
            return try await postgres.committedEntries(missing)
        }
        let oldest = head - window
        let commands = entries.filter { $0.revision > oldest }.flatMap { CachedEntry.setCommands($0, keys: keys) }
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

    public func didCommit(_ entries: [CommittedEntry]) async {
        guard let last = entries.last else { return }
        for entry in entries {
            let size = Double(entry.body.readableBytes + entry.authorBody.readableBytes + 12)
            averageEntryBytes.withLock { $0 = $0 * 0.99 + size * 0.01 }
        }
        guard let keys = usableKeys else { return }
        var commands: [[ByteBuffer]] = []
        for entry in entries {
            commands += CachedEntry.setCommands(entry, keys: keys)
            let evicted = entry.revision - window
            if evicted > 0 {
                commands.append([ByteBuffer(string: "DEL"), ByteBuffer(string: keys.entry(evicted)), ByteBuffer(string: keys.author(evicted))])
            }
        }
        // The entries first, then the head, in one round trip for the whole batch: a reader
        // that sees the new head finds the entries (or backfills them).
        commands.append(["EVAL", Self.raiseScript, "1", keys.head, String(last.revision)].map { ByteBuffer(string: $0) })
        do {
            _ = try await redis.pipeline(commands)
            metrics.recordCache("writes", count: entries.count)
            health.succeeded()
        } catch {
            health.failed(error)
        }
    }
}
