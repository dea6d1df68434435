import Foundation

/// Everything the server can be configured with; defaults fit the project's own stack.
public struct ServerSettings: Sendable {
    public var host = "127.0.0.1"
    public var port = 8080
    public var databaseURL = "postgres://revsync@127.0.0.1:54329/revsync"
    /// Bearer token(s) for the device endpoints, comma-separated; nil (and no file) disables them.
    public var adminToken: String?
    /// A file of admin tokens, one per line, read on every admin request.
    public var adminTokenFile: String?
    /// Bearer token `GET /metrics` requires; nil leaves it open (bind the server to a private address then).
    public var metricsToken: String?
    public var schemaPath = "Config/schema.json"
    public var limits = Limits()
    /// Connections per instance and how long a client may take.
    public var connections = ConnectionLimits()
    /// Requests handled at once per instance; past it, `503` with `Retry-After`.
    public var maxRequestsInFlight = 1024
    /// Tasks kept to run `POST /sync` requests apart from the connections' tasks, so that a
    /// connection (a waiting device's) does not keep a request's frames for as long as it
    /// lives (`RequestWorkers`: held ones are replaced, up to 16 times as many). 0 runs every
    /// request on its connection's task.
    public var requestWorkers = 256
    /// `POST /sync` requests of one device under way at once per instance; past it, `503`.
    public var maxRequestsPerDevice = 4
    /// Look-ups of tokens not in the cache per second and instance; past it, `503` with `Retry-After`.
    public var tokenLookupsPerSecond = 2000
    /// Change sets kept in the log; 0 keeps all. Older ones need a snapshot.
    public var logRetention: Int64 = 0
    /// How often the retention job runs.
    public var pruneInterval: Duration = .seconds(60)
    /// How long a request waits for PostgreSQL before answering 503.
    public var databaseTimeout: Duration = .seconds(10)
    public var databaseConnections = 20
    /// How soon after a pooled connection falls idle it runs a keep-alive (`SELECT 1`), and
    /// again after each one, until the pool closes it (60 s idle); at most half of
    /// `databaseTimeout` is used. While PostgreSQL refuses the pool new connections, a request
    /// waits for a connection to come back to the pool (PostgresNIO queues it even with
    /// connections idle), which a keep-alive's end does: this bounds that wait. Each keep-alive
    /// costs the server CPU while connections stay idle: with 20 idle, 1 s doubled an idle
    /// server's CPU (docs/performance.md), 5 s costs little more than none.
    public var databaseKeepAlive: Duration = .seconds(5)
    /// Change sets of concurrent requests applied in one transaction (group commit), at most 64:
    /// a batch PostgreSQL refuses is run again with a savepoint per change set, and past 64
    /// subtransactions PostgreSQL's per-backend cache overflows and every backend slows down.
    public var commitBatchSize = 64
    /// How long the request leading a batch waits for others to join it; 0 takes what is queued.
    public var commitBatchWait: Duration = .zero
    /// The longest a `/sync` request without change sets may wait for a commit (its `wait`);
    /// zero answers every request at once. Proxies in front need a read timeout above it.
    public var maxWait: Duration = .seconds(60)
    /// While requests wait, how often PostgreSQL's head is read in case a wake-up message was
    /// lost (or, with Redis off, to hear other instances' commits at all).
    public var waitRecheckInterval: Duration = .seconds(1)
    /// Redis for the catch-up cache; nil serves catch-up from PostgreSQL alone.
    public var redisURL: String? = "redis://127.0.0.1:63799"
    /// How long opening a connection to Redis may take before the instance serves from
    /// PostgreSQL alone (degraded) and tries again. Short, so that a Redis that is down holds
    /// up no request; a Redis farther away, or a machine loaded to its limit, may need more.
    public var redisConnectTimeout: Duration = .milliseconds(250)
    /// How long Redis may stay silent while calls wait before they fail and the connection is
    /// replaced. A Redis cut off without its connections closing (a partition) is known only
    /// past it; cached devices stop being trusted a second after the last successful read of
    /// the device-change counter, whatever this is (`DeviceChangeWatcher`).
    public var redisCommandTimeout: Duration = .seconds(2)
    /// First part of every cache key (the database's instance id follows).
    public var cachePrefix = "revsync"
    /// Most recent change sets kept in the cache.
    public var cacheWindow: Int64 = 100_000
    /// Approximate bytes of change sets kept in the cache; the window shrinks to fit.
    public var cacheMaxBytes = 512 * 1024 * 1024
    /// The latest revisions this instance committed whose cache values it also keeps in
    /// memory (`RecentValues`): a catch-up inside them skips Redis. 0 keeps none.
    public var cacheMemoryRevisions: Int64 = 1024
    /// How often the cached head and horizon are checked against PostgreSQL.
    public var cacheReconcileInterval: Duration = .seconds(1)
    /// How often the database's head and history id are read (`HistoryWatch`): a database that
    /// went back under a running instance is found within this, and a history id renewed by
    /// another instance (or `revsync restored`) learned.
    public var historyCheckInterval: Duration = .seconds(1)
    /// How often the Redis device-change counter is read besides when the subscription that
    /// announces changes (re)starts: a change missed without the subscription noticing takes
    /// effect within this, and each read lets cached devices live until a change is heard
    /// for one second, or one and a half of it if longer (`DeviceChangeWatcher`).
    public var deviceCheckInterval: Duration = .milliseconds(500)
    /// Where SQLite snapshot files are built and kept. Nil: a directory of the instance's
    /// own under the system's temporary directory, removed when the server stops.
    /// Instances may share one (they then build one at a time and serve each other's files).
    public var snapshotDirectory: String?
    /// A snapshot file is rebuilt once the head is this many revisions past it…
    public var snapshotRebuildRevisions: Int64 = 1000
    /// …or once it is this old and the head has moved at all. The old file is served meanwhile.
    public var snapshotMaxAge: Duration = .seconds(300)
    /// How long a replaced snapshot file stays, so that a download resumed with `If-Range`
    /// still finds it (one in progress holds the file open and needs nothing).
    public var snapshotKeepReplaced: Duration = .seconds(600)

    public init() {}

    /// Request and response size limits.
    public struct Limits: Sendable {
        /// Request body as received (compressed or not).
        public var maxBodyBytes = 8 * 1024 * 1024
        /// Request body after inflating gzip.
        public var maxInflatedBytes = 32 * 1024 * 1024
        /// Nesting of JSON arrays and objects.
        public var maxJSONDepth = 32
        /// Change sets in one request.
        public var maxChangeSetsPerRequest = 1000
        /// Creates, updates and deletes in one change set; past it the set is rejected (`invalid`).
        public var maxOperationsPerChangeSet = 10_000
        /// Operations in all change sets of one request; past it the request is `413 too_large`.
        public var maxOperationsPerRequest = 50_000
        /// Bytes of one change set's log entry, cascades included; past it the set is rejected (`invalid`).
        public var maxLogEntryBytes = 4 * 1024 * 1024
        /// Bytes of one corrective set; a larger repair is replaced by an instruction to re-bootstrap.
        public var maxCorrectiveBytes = 1024 * 1024
        /// Bytes of all corrective sets of one response; past it the rest are re-bootstrap instructions.
        public var maxCorrectiveBytesPerResponse = 8 * 1024 * 1024
        /// Change sets in one catch-up response before `more`.
        public var catchUpMaxChangeSets = 1000
        /// Bytes of change sets in one catch-up response before `more` (at least one is always sent).
        public var catchUpMaxBytes = 4 * 1024 * 1024

        public init() {}
    }

    /// The longest duration any setting takes: 30 days.
    static let maxDurationSeconds = 30 * 86_400
    /// The longest `REVSYNC_DB_TIMEOUT_SECONDS`: a day, well inside PostgreSQL's limit for
    /// `statement_timeout` (2^31 - 1 ms).
    static let maxDatabaseTimeoutSeconds = 86_400

    /// Settings from `REVSYNC_*` environment variables over the defaults.
    public static func fromEnvironment(_ environment: [String: String] = ProcessInfo.processInfo.environment) throws -> ServerSettings {
        var settings = ServerSettings()
        func value(_ name: String) -> String? {
            guard let text = environment[name], !text.isEmpty else { return nil }
            return text
        }
        func integer(_ name: String, atMost limit: Int? = nil) throws -> Int? {
            guard let text = value(name) else { return nil }
            guard let number = Int(text), number >= 0 else {
                throw SettingsError("\(name) must be a non-negative integer, not \"\(text)\"")
            }
            if let limit, number > limit {
                throw SettingsError("\(name) must be at most \(limit), not \(text)")
            }
            return number
        }
        // Durations are bounded: past about 292 years a timer's nanoseconds overflow and trap,
        // and PostgreSQL takes a statement timeout of at most 2^31 - 1 ms (24.8 days). Nothing
        // here is meant to last longer than these.
        func seconds(_ name: String) throws -> Int? { try integer(name, atMost: Self.maxDurationSeconds) }
        func milliseconds(_ name: String) throws -> Int? { try integer(name, atMost: Self.maxDurationSeconds * 1000) }
        if let listen = value("REVSYNC_LISTEN") { try settings.setListen(listen) }
        if let url = value("REVSYNC_DATABASE_URL") { settings.databaseURL = url }
        settings.adminToken = value("REVSYNC_ADMIN_TOKEN")
        settings.adminTokenFile = value("REVSYNC_ADMIN_TOKEN_FILE")
        // Trimmed as the admin tokens are: a token read from a secret's file often ends in a newline.
        // Nothing but whitespace is refused, not taken as unset: that would open `/metrics`.
        if let token = value("REVSYNC_METRICS_TOKEN") {
            let trimmed = token.trimmingCharacters(in: .whitespacesAndNewlines)
            guard !trimmed.isEmpty else {
                throw SettingsError("REVSYNC_METRICS_TOKEN holds only whitespace: set a token, or unset it to leave /metrics open")
            }
            settings.metricsToken = trimmed
        }
        if let path = value("REVSYNC_SCHEMA") { settings.schemaPath = path }
        if let n = try integer("REVSYNC_MAX_CONNECTIONS") { settings.connections.maxConnections = max(1, n) }
        if let n = try integer("REVSYNC_MAX_REQUESTS_IN_FLIGHT") { settings.maxRequestsInFlight = max(1, n) }
        if let n = try integer("REVSYNC_MAX_REQUESTS_PER_DEVICE") { settings.maxRequestsPerDevice = max(1, n) }
        if let n = try integer("REVSYNC_TOKEN_LOOKUPS_PER_SECOND") { settings.tokenLookupsPerSecond = max(1, n) }
        if let n = try seconds("REVSYNC_HTTP_IDLE_TIMEOUT_SECONDS") { settings.connections.idleTimeout = .seconds(max(1, n)) }
        if let n = try seconds("REVSYNC_HTTP_HEADER_TIMEOUT_SECONDS") { settings.connections.headerTimeout = .seconds(max(1, n)) }
        if let n = try seconds("REVSYNC_HTTP_BODY_TIMEOUT_SECONDS") { settings.connections.bodyTimeout = .seconds(max(1, n)) }
        if let n = try integer("REVSYNC_MAX_BODY_BYTES") { settings.limits.maxBodyBytes = max(1024, n) }
        if let n = try integer("REVSYNC_MAX_INFLATED_BYTES") { settings.limits.maxInflatedBytes = max(1024, n) }
        // A change set's attributes sit six levels deep: less would refuse every write.
        if let n = try integer("REVSYNC_MAX_JSON_DEPTH") { settings.limits.maxJSONDepth = max(8, n) }
        if let n = try integer("REVSYNC_MAX_CHANGE_SETS") { settings.limits.maxChangeSetsPerRequest = max(1, n) }
        if let n = try integer("REVSYNC_MAX_OPERATIONS_PER_CHANGE_SET") { settings.limits.maxOperationsPerChangeSet = max(1, n) }
        if let n = try integer("REVSYNC_MAX_OPERATIONS_PER_REQUEST") { settings.limits.maxOperationsPerRequest = max(1, n) }
        if let n = try integer("REVSYNC_MAX_LOG_ENTRY_BYTES") { settings.limits.maxLogEntryBytes = max(1024, n) }
        if let n = try integer("REVSYNC_MAX_CORRECTIVE_BYTES") { settings.limits.maxCorrectiveBytes = max(1024, n) }
        if let n = try integer("REVSYNC_MAX_CORRECTIVE_BYTES_PER_RESPONSE") { settings.limits.maxCorrectiveBytesPerResponse = max(1024, n) }
        if let n = try integer("REVSYNC_CATCHUP_MAX_CHANGE_SETS") { settings.limits.catchUpMaxChangeSets = max(1, n) }
        if let n = try integer("REVSYNC_CATCHUP_MAX_BYTES") { settings.limits.catchUpMaxBytes = n }
        if let n = try integer("REVSYNC_LOG_RETENTION") { settings.logRetention = Int64(n) }
        if let n = try seconds("REVSYNC_PRUNE_INTERVAL_SECONDS") { settings.pruneInterval = .seconds(max(1, n)) }
        if let n = try integer("REVSYNC_DB_TIMEOUT_SECONDS", atMost: Self.maxDatabaseTimeoutSeconds) { settings.databaseTimeout = .seconds(max(1, n)) }
        if let n = try integer("REVSYNC_DB_CONNECTIONS") { settings.databaseConnections = max(2, n) }
        if let n = try seconds("REVSYNC_DB_KEEPALIVE_SECONDS") { settings.databaseKeepAlive = .seconds(max(1, n)) }
        if let n = try integer("REVSYNC_COMMIT_BATCH_SIZE") { settings.commitBatchSize = min(64, max(1, n)) }
        if let n = try milliseconds("REVSYNC_COMMIT_WAIT_MS") { settings.commitBatchWait = .milliseconds(max(0, n)) }
        if let n = try integer("REVSYNC_REQUEST_WORKERS") { settings.requestWorkers = max(0, n) }
        if let n = try seconds("REVSYNC_MAX_WAIT_SECONDS") { settings.maxWait = .seconds(n) }
        if let n = try milliseconds("REVSYNC_WAIT_RECHECK_MS") { settings.waitRecheckInterval = .milliseconds(max(10, n)) }
        if let url = value("REVSYNC_REDIS_URL") { settings.redisURL = url == "off" ? nil : url }
        if let n = try milliseconds("REVSYNC_REDIS_CONNECT_TIMEOUT_MS") { settings.redisConnectTimeout = .milliseconds(max(1, n)) }
        if let n = try milliseconds("REVSYNC_REDIS_COMMAND_TIMEOUT_MS") { settings.redisCommandTimeout = .milliseconds(max(1, n)) }
        if let prefix = value("REVSYNC_CACHE_PREFIX") { settings.cachePrefix = prefix }
        if let n = try integer("REVSYNC_CACHE_WINDOW") { settings.cacheWindow = Int64(max(1, n)) }
        if let n = try integer("REVSYNC_CACHE_MAX_BYTES") { settings.cacheMaxBytes = max(1024, n) }
        if let n = try integer("REVSYNC_CACHE_MEMORY_REVISIONS") { settings.cacheMemoryRevisions = Int64(max(0, n)) }
        if let n = try milliseconds("REVSYNC_CACHE_RECONCILE_MS") { settings.cacheReconcileInterval = .milliseconds(max(10, n)) }
        if let n = try milliseconds("REVSYNC_HISTORY_CHECK_MS") { settings.historyCheckInterval = .milliseconds(max(10, n)) }
        if let n = try milliseconds("REVSYNC_DEVICE_CHECK_MS") { settings.deviceCheckInterval = .milliseconds(max(10, n)) }
        if let directory = value("REVSYNC_SNAPSHOT_DIR") { settings.snapshotDirectory = directory }
        if let n = try integer("REVSYNC_SNAPSHOT_REBUILD_REVISIONS") { settings.snapshotRebuildRevisions = Int64(max(1, n)) }
        if let n = try seconds("REVSYNC_SNAPSHOT_MAX_AGE_SECONDS") { settings.snapshotMaxAge = .seconds(max(1, n)) }
        if let n = try seconds("REVSYNC_SNAPSHOT_KEEP_REPLACED_SECONDS") { settings.snapshotKeepReplaced = .seconds(n) }
        return settings
    }

    /// `host:port` or `[v6]:port`. A bare `:port` is refused: some tools read it as every
    /// interface, others as this machine only, and either guess surprises someone.
    public mutating func setListen(_ listen: String) throws {
        guard let colon = listen.lastIndex(of: ":"), let port = Int(listen[listen.index(after: colon)...]), (0...65535).contains(port) else {
            throw SettingsError("REVSYNC_LISTEN must be host:port (e.g. 127.0.0.1:8080), not \"\(listen)\"")
        }
        var host = String(listen[..<colon])
        if host.hasPrefix("[") && host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        guard !host.isEmpty else {
            throw SettingsError(
                "REVSYNC_LISTEN \"\(listen)\" names no host: use 0.0.0.0:\(port) for every interface, or 127.0.0.1:\(port) for this machine only")
        }
        self.host = host
        self.port = port
    }
}

/// A setting that cannot be used, with what to change.
public struct SettingsError: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}
