/// Everything a soak run is told. The defaults are `Scripts/soak`'s: 50 devices
/// for two minutes on the terrible link, one server kill and one Redis flush.
public struct SoakSettings: Sendable {
    public var devices = 50
    /// Devices that register and bootstrap (through their link) during the run; nil: a tenth of `devices`.
    public var joiningDevices: Int?
    public var workload: Duration = .seconds(120)
    /// `good`, `wifi` or `terrible` (RevsyncLink's presets).
    public var link = "terrible"
    /// Individual link settings over the preset.
    public var linkKnobs = LinkKnobs()
    public var instances = 1
    public var seed: UInt64
    /// Records seeded before the devices start.
    public var seedRecords = 100_000
    /// Server-side and device-side faults switched on (`FaultKind.switchable`); crashes and joins are counted apart.
    public var faults: Set<FaultKind> = [.serverKill, .redisFlush]
    /// Devices killed mid-sync and restarted from their file; nil: a fifth of `devices`.
    public var deviceCrashes: Int?
    /// Shared records every device keeps touching (the source of conflicts).
    public var hotSetSize = 40
    /// Mean pause between two actions of one user.
    public var thinkTime: Duration = .seconds(4)
    /// How long a device lets the server hold its catch-up when it has nothing to send
    /// (`SyncEngineConfiguration.wait`, a long-poll); zero: a catch-up every 5 s instead.
    public var longPollWait: Duration = .seconds(25)
    /// How long every device has after healing to send everything and catch up.
    public var drainBound: Duration = .seconds(300)
    /// Devices bootstrapped at once before the run (each loads the whole snapshot).
    public var bootstrapConcurrency = 4
    /// Per-device SQLite files, server logs and the report go here.
    public var runDirectory: String
    /// The `revsync` server executable.
    public var serverExecutable: String
    /// A PostgreSQL URL; the run creates (dropping any old one) the database `databaseName` next to it.
    public var databaseURL: String
    public var databaseName = "revsync_soak"
    /// nil runs the servers without the Redis cache (then Redis faults are skipped).
    public var redisURL: String?
    public var schemaPath: String
    public var restartRedisCommand: [String]
    public var restartPostgresCommand: [String]
    /// Ports of the server instances; nil: free ports.
    public var serverPorts: [Int]?
    /// The live progress line on standard error.
    public var showProgress = true
    /// The command line that replays this run, for the report.
    public var replayCommand = ""
    /// Written as `<reportName>.json` and `.html` in `runDirectory`.
    public var reportName = "soak-report"

    public init(
        seed: UInt64, runDirectory: String, serverExecutable: String, databaseURL: String, redisURL: String?, schemaPath: String,
        restartRedisCommand: [String], restartPostgresCommand: [String]
    ) {
        self.seed = seed
        self.runDirectory = runDirectory
        self.serverExecutable = serverExecutable
        self.databaseURL = databaseURL
        self.redisURL = redisURL
        self.schemaPath = schemaPath
        self.restartRedisCommand = restartRedisCommand
        self.restartPostgresCommand = restartPostgresCommand
    }

    var joining: Int { joiningDevices ?? devices / 10 }
    var crashes: Int { deviceCrashes ?? devices / 5 }

    /// The switched faults that can happen with these settings (no Redis, no Redis faults).
    var effectiveFaults: Set<FaultKind> {
        redisURL == nil ? faults.subtracting([.redisFlush, .redisRestart, .redisPartition]) : faults
    }
}
