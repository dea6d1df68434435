import Foundation
import Hummingbird
import Logging
import NIOPosix
import PostgresNIO
import RevsyncHarness
import RevsyncRedis
import RevsyncRules
import ServiceLifecycle

/// The Revsync server: its components, and the Hummingbird application that serves them.
public struct Server: Sendable {
    public let settings: ServerSettings
    public let schema: DatasetSchema
    public let postgres: PostgresClient
    /// `postgres` as a service: run this, not the client itself, so that its stop cannot hang
    /// the process's (`BoundedStop`).
    public var postgresService: BoundedStop<PostgresClient> { BoundedStop(postgres, limit: .seconds(5), logger: logger) }
    public let database: Database
    public let metrics: ServerMetrics
    public let migrator: Migrator
    public let pruner: LogPruner
    public let devices: DeviceStore
    /// The catch-up path: Redis in front of PostgreSQL, or PostgreSQL alone.
    public let changeLog: any ChangeLog
    /// `POST /sync`; `respond` is the exchange without HTTP framing (the benchmark times it).
    public let sync: SyncController
    let cache: RedisChangeLog?
    let redis: RedisClient?
    let logger: Logger
    /// Requests waiting for a commit (long-poll), woken by this instance's commits and `CommitFeed`.
    let waiters: CommitWaiters
    let commitFeed = CommitFeed.Status()
    /// Requests under way; waiting ones give their place up.
    let inFlight = BoundedCount()
    /// Each device's JSON snapshots under way (`DatasetController`).
    let jsonSnapshotsPerDevice: DeviceRequestCount
    /// The SQLite snapshot files `GET /snapshot` serves, and their rebuilds.
    let snapshotFiles: SnapshotFiles
    /// Where JSON snapshots are written before they are sent.
    let snapshotSpool: SnapshotSpool
    /// The tasks `POST /sync` requests run on; nil with `requestWorkers` 0.
    let requestWorkers: RequestWorkers?
    /// The database's history id: read, checked against requests, renewed when the database went back.
    package let history: HistoryWatch

    /// Loads the schema and prepares the database client; nothing connects until the application runs.
    public init(settings: ServerSettings, logger: Logger, applyDelay: ApplyDelay? = nil) throws {
        let url = URL(fileURLWithPath: settings.schemaPath)
        let schemaData: Data
        do {
            schemaData = try Data(contentsOf: url)
        } catch {
            throw SchemaError(file: settings.schemaPath, entity: nil, attribute: nil, problem: "cannot be read (\(error.localizedDescription)); set REVSYNC_SCHEMA")
        }
        self.settings = settings
        self.schema = try SchemaLoader.load(data: schemaData, file: settings.schemaPath)
        self.logger = logger
        let configuration = try Self.postgresConfiguration(settings)
        postgres = PostgresClient(configuration: configuration, backgroundLogger: logger)
        let keepAlive = try DatabaseURL.keepAlive(settings.databaseURL)
        let metrics = ServerMetrics(entities: Set(schema.entities.map(\.name)))
        self.metrics = metrics
        database = Database(
            client: postgres, logger: logger, timeout: settings.databaseTimeout, keepAlive: keepAlive,
            onUnanswered: { metrics.recordUnansweredConnection() })
        migrator = Migrator(database: database, schema: schema, schemaDocument: String(decoding: schemaData, as: UTF8.self))
        devices = DeviceStore(database: database, lookupsPerSecond: settings.tokenLookupsPerSecond, batchedLookups: true)
        let postgresLog = PostgresChangeLog(database: database)
        if let url = settings.redisURL {
            var redisConfiguration = try RedisConfiguration(url: url)
            redisConfiguration.connectTimeout = settings.redisConnectTimeout
            redisConfiguration.commandTimeout = settings.redisCommandTimeout
            let client = try RedisClient(configuration: redisConfiguration, logger: logger)
            let cache = RedisChangeLog(postgres: postgresLog, redis: client, settings: settings, metrics: metrics, logger: logger)
            redis = client
            self.cache = cache
            changeLog = cache
        } else {
            redis = nil
            cache = nil
            changeLog = postgresLog
        }
        waiters = CommitWaiters(timers: MultiThreadedEventLoopGroup.singleton, changed: { metrics.recordWaiting($0) })
        var changeSets = PostgresChangeSetStore(database: database, schema: schema)
        changeSets.delayAfterStamp = applyDelay
        changeSets.metrics = metrics
        requestWorkers = settings.requestWorkers > 0 ? RequestWorkers(size: settings.requestWorkers, metrics: metrics) : nil
        let changeLog = self.changeLog
        let ownDirectory = settings.snapshotDirectory == nil
        let directory = settings.snapshotDirectory
            ?? NSTemporaryDirectory() + SnapshotFiles.ownDirectoryPrefix
            + "\(ProcessInfo.processInfo.processIdentifier)-\(UUID().uuidString.prefix(8).lowercased())"
        jsonSnapshotsPerDevice = DeviceRequestCount(limit: settings.maxRequestsPerDevice)
        snapshotFiles = SnapshotFiles(
            directory: directory, removeDirectoryAtEnd: ownDirectory, builder: SnapshotFileBuilder(database: database, schema: schema),
            policy: .init(
                rebuildRevisions: settings.snapshotRebuildRevisions, maxAge: settings.snapshotMaxAge,
                retiredFor: settings.snapshotKeepReplaced),
            head: { try await changeLog.state().head },
            history: { [database] in try await PostgresHistory(database: database).read().id }, logger: logger)
        let files = snapshotFiles, cache = self.cache, waiters = self.waiters
        history = HistoryWatch(
            history: DatasetHistory(), store: PostgresHistory(database: database), interval: settings.historyCheckInterval, logger: logger,
            changed: { id in
                await cache?.forgetHistory()
                await files.historyChanged(to: id)
            },
            cacheFoundRewind: { cache?.takeRewindFound() },
            adopted: { head in waiters.rewind(to: head) })
        sync = SyncController(
            authenticator: Authenticator(devices: devices), bodyReader: RequestBodyReader(limits: settings.limits),
            service: SyncService(
                changeSets: changeSets, changeLog: changeLog, records: PostgresRecordStore(database: database, schema: schema),
                schema: schema, limits: settings.limits, metrics: metrics,
                commitBatchSize: settings.commitBatchSize, commitBatchWait: settings.commitBatchWait,
                longPoll: LongPoll(waiters: waiters, maxWait: settings.maxWait, inFlight: inFlight, logger: logger), history: history),
            perDevice: DeviceRequestCount(limit: settings.maxRequestsPerDevice))
        // In the instance's own work directory, even in a directory the instances share.
        snapshotSpool = SnapshotSpool(
            streamer: SnapshotStreamer(database: database, schema: schema), work: snapshotFiles.work,
            readers: ConcurrencyGate(limit: settings.databaseConnections / 4))
        var pruner = LogPruner(database: database, retention: settings.logRetention, interval: settings.pruneInterval)
        if let cache = self.cache {
            pruner.afterPrune = { await cache.reconcile() }
        }
        self.pruner = pruner
    }

    /// Builds the SQLite snapshot file now, whatever its age, and returns its revision once it
    /// is served (tests and the bench; the server rebuilds it by itself as the head moves on).
    public func rebuildSnapshotFile() async throws -> Int64 {
        try await snapshotFiles.rebuild().revision
    }

    /// The routes: each controller decodes, authenticates once and calls its service.
    func buildRouter() -> Router<RevsyncRequestContext> {
        // `HEAD` on every `GET` route, as RFC 9110 asks (load balancers' health checks send it):
        // the `GET` runs and its body is dropped. `GET /snapshot` has a `HEAD` of its own.
        let options: RouterOptions = .autoGenerateHeadEndpoints
        let router = Router(context: RevsyncRequestContext.self, options: options)
        let routes = KnownRoutes()
        router.middlewares.add(ObservationMiddleware(metrics: metrics, maxInFlight: settings.maxRequestsInFlight, inFlight: inFlight, routes: routes))
        let bodyReader = sync.bodyReader
        let authenticator = sync.authenticator
        sync.addRoutes(to: router)
        let cache = self.cache
        DeviceController(
            adminTokens: AdminTokens(inline: settings.adminToken, file: settings.adminTokenFile), devices: devices,
            authenticator: authenticator, schema: schema, bodyReader: bodyReader,
            announce: { await cache?.publishDeviceChange() }
        ).addRoutes(to: router)
        DatasetController(
            authenticator: authenticator, schema: schema, spool: snapshotSpool, files: snapshotFiles,
            jsonSnapshotsPerDevice: jsonSnapshotsPerDevice
        ).addRoutes(to: router)
        MonitoringController(database: database, metrics: metrics, metricsToken: settings.metricsToken).addRoutes(to: router)
        OpenAPIController().addRoutes(to: router)
        routes.learn(router.routes, headForGet: options.contains(.autoGenerateHeadEndpoints))
        return router
    }

    /// The PostgreSQL client's configuration for `settings`.
    static func postgresConfiguration(_ settings: ServerSettings) throws -> PostgresClient.Configuration {
        var configuration = try DatabaseURL.configuration(
            settings.databaseURL, connections: settings.databaseConnections, statementTimeout: settings.databaseTimeout)
        // While PostgreSQL refuses the pool a new connection (max_connections or a role's limit
        // reached), PostgresNIO's pool queues every request, even with connections of its own
        // idle, and hands one out only when a connection comes back to it: with all of them idle,
        // nothing comes back until a keep-alive ends (every 30 s by default), and requests got
        // 503 or, with no deadline, waited on. A keep-alive soon after a connection falls idle
        // (`REVSYNC_DB_KEEPALIVE_SECONDS`, at most half the wait a request is allowed) bounds
        // that wait; once one is handed out, each one released serves the next in the queue.
        // An idle connection costs a `SELECT 1` each time until the pool closes it (60 s). The
        // pool can then hang as it stops, which `BoundedStop` keeps from the server.
        configuration.options.keepAliveBehavior = .init(frequency: min(settings.databaseKeepAlive, settings.databaseTimeout / 2))
        return configuration
    }

    /// The application: the router, and the services that run with it. It migrates before it listens.
    /// - Parameters:
    ///   - migrate: run migrations before listening (tests of an unreachable database turn it off).
    ///   - onListening: called with the port the server listens on once it does; with port 0
    ///     in the settings the kernel picks it, which is how the tests run servers side by side
    ///     without two of them ever taking one port.
    public func buildApplication(
        migrate: Bool = true, onListening: @escaping @Sendable (Int) async -> Void = { _ in }
    ) -> some ApplicationProtocol {
        let cache = self.cache
        // One per run: the watcher's stream can be read once.
        let deviceEvents = DeviceChangeWatcher.Events()
        // One value: the migrations below wait for this one's start.
        let postgresRunning = postgresService
        var services: [any Service] = [
            postgresRunning, pruner, DeviceChangeWatcher(
                devices: devices, feed: cache, events: deviceEvents, checkInterval: settings.deviceCheckInterval, logger: logger),
            SnapshotFilesService(files: snapshotFiles), history,
        ]
        // After PostgreSQL's client, so that it stops before it (services stop in reverse order).
        if let lookups = devices.lookups { services.append(lookups) }
        // Before the HTTP server, so that they stop after it: no request is under way by then.
        if let requestWorkers { services.append(requestWorkers) }
        if let redis, let cache {
            services += [
                RedisService(client: redis), CacheReconciler(
                    cache: cache, interval: settings.cacheReconcileInterval, waiters: waiters, feed: commitFeed, history: history,
                    deviceEvents: deviceEvents),
            ]
        }
        // Last, so that it stops first (services stop in reverse order), while Redis still runs.
        services.append(
            CommitFeed(waiters: waiters, status: commitFeed, changeLog: changeLog, cache: cache, deviceEvents: deviceEvents,
                recheckInterval: settings.waitRecheckInterval, logger: logger))
        var app = Application(
            router: buildRouter(),
            server: GuardedHTTP1Channel.builder(limits: settings.connections, count: BoundedCount(), workers: requestWorkers),
            configuration: .init(address: .hostname(settings.host, port: settings.port), serverName: "revsync"),
            services: services,
            onServerRunning: { channel in
                if let port = channel.localAddress?.port { await onListening(port) }
            },
            logger: logger)
        let migrator = self.migrator, logger = self.logger, history = self.history
        app.beforeServerStarts {
            // The services start beside this: a lease before the client runs is served all the
            // same, but PostgresNIO warns of it.
            try await postgresRunning.start.wait()
            if migrate {
                for step in try await migrator.migrate() { logger.info("migrated", metadata: ["step": .string(step)]) }
            }
            try? await cache?.prepare()
            // Before the first request: the id answers carry, and a cache found ahead above renews it.
            do {
                try await history.check()
            } catch {
                logger.warning("the database's history id could not be read; requests are not checked against it until it is", metadata: ["error": "\(error)"])
            }
        }
        return app
    }
}
