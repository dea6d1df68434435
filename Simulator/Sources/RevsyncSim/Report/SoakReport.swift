/// Everything a soak run measured and concluded: written as JSON, rendered as a
/// terminal table and as an offline HTML page. Times are seconds since the
/// workload started unless a name says otherwise; latencies are milliseconds.
public struct SoakReport: Codable, Sendable, Equatable {
    public var seed: UInt64
    public var settings: SoakSettingsSummary
    /// Wall-clock start, ISO 8601 UTC.
    public var startedAt: String
    /// Whole run: seeding, bootstrap, workload, heal, drain and verdict.
    public var totalSeconds: Double
    public var verdict: VerdictSummary
    public var operations: OperationCounts
    public var changeSets: ChangeSetCounts
    /// Faults injected, by kind: link fates (`reset_mid_request`, …), `offline_window`,
    /// `device_crash`, `device_join`, `server_kill`, `redis_flush`, `redis_restart`, `postgres_restart`,
    /// `device_restore`, `device_revoke`, `device_role_downgrade`.
    public var faults: [String: Int]
    public var bytes: ByteCounts
    /// Nil in reports from before snapshot files.
    public var snapshots: SnapshotDownloads?
    public var catchUpLatency: CatchUpLatency
    /// From a writer's acknowledgement to its revision applied on every other online device.
    public var writeToVisible: WriteToVisibleLatency?
    public var convergence: ConvergenceSummary
    /// One sample per second of the workload and the drain.
    public var timeline: [TimelineSample]
    /// Faults and phase changes, in time order.
    public var events: [TimelineEvent]

    public init(
        seed: UInt64, settings: SoakSettingsSummary, startedAt: String, totalSeconds: Double, verdict: VerdictSummary,
        operations: OperationCounts, changeSets: ChangeSetCounts, faults: [String: Int], bytes: ByteCounts,
        catchUpLatency: CatchUpLatency, writeToVisible: WriteToVisibleLatency? = nil, convergence: ConvergenceSummary,
        timeline: [TimelineSample], events: [TimelineEvent]
    ) {
        self.seed = seed
        self.settings = settings
        self.startedAt = startedAt
        self.totalSeconds = totalSeconds
        self.verdict = verdict
        self.operations = operations
        self.changeSets = changeSets
        self.faults = faults
        self.bytes = bytes
        self.catchUpLatency = catchUpLatency
        self.writeToVisible = writeToVisible
        self.convergence = convergence
        self.timeline = timeline
        self.events = events
    }
}

/// The run's settings as the report shows them.
public struct SoakSettingsSummary: Codable, Sendable, Equatable {
    public var devices: Int
    public var joiningDevices: Int
    public var workloadSeconds: Double
    public var link: String
    public var instances: Int
    public var seededRecords: Int
    /// Server-side faults switched on (`server_kill`, `redis_flush`, `redis_restart`, `postgres_restart`).
    public var serverFaults: [String]
    /// Device-side faults switched on (`device_restore`, `device_revoke`, `device_role_downgrade`).
    public var deviceFaults: [String]
    /// How long a device let the server hold its catch-up (long-poll); 0: it polled. Nil in older reports.
    public var longPollWaitSeconds: Double?
    /// The command line that replays this run.
    public var replay: String

    public init(
        devices: Int, joiningDevices: Int, workloadSeconds: Double, link: String, instances: Int, seededRecords: Int,
        serverFaults: [String], deviceFaults: [String] = [], longPollWaitSeconds: Double? = nil, replay: String
    ) {
        self.devices = devices
        self.joiningDevices = joiningDevices
        self.workloadSeconds = workloadSeconds
        self.link = link
        self.instances = instances
        self.seededRecords = seededRecords
        self.serverFaults = serverFaults
        self.deviceFaults = deviceFaults
        self.longPollWaitSeconds = longPollWaitSeconds
        self.replay = replay
    }
}

/// One check of the verdict: its name, whether it held, and what was found.
public struct VerdictCheck: Codable, Sendable, Equatable {
    public var name: String
    public var passed: Bool
    /// What was measured ("50 devices equal to PostgreSQL", "lost 0") or, on a
    /// violation, what differs (e.g. the first differing record on both sides).
    public var detail: String

    public init(name: String, passed: Bool, detail: String) {
        self.name = name
        self.passed = passed
        self.detail = detail
    }
}

public struct VerdictSummary: Codable, Sendable, Equatable {
    public var checks: [VerdictCheck]
    public var passed: Bool { checks.allSatisfy(\.passed) }
    public var violations: [VerdictCheck] { checks.filter { !$0.passed } }

    public init(checks: [VerdictCheck]) {
        self.checks = checks
    }
}

/// What the virtual users did.
public struct OperationCounts: Codable, Sendable, Equatable {
    /// Local transactions committed (each one change set).
    public var transactions = 0
    public var creates = 0
    public var updates = 0
    public var deletes = 0
    /// Transactions made while the device's link was offline.
    public var offlineTransactions = 0
    /// Transactions the device engine refused locally (e.g. a record already gone); not sent.
    public var refusedLocally = 0
    public var syncRounds = 0
    /// Long-polls the server answered: with new change sets, or with nothing at the end of the wait.
    public var longPolls = 0
    /// Of those, the ones that brought new change sets.
    public var longPollsWithChanges = 0
    public var bootstraps = 0

    public init() {}
}

public struct ChangeSetCounts: Codable, Sendable, Equatable {
    /// Change sets put on the wire, resends included.
    public var sent = 0
    public var acknowledged = 0
    /// Rejections delivered to devices, by reason code (`stale_revision`, `deleted`, `forbidden`, …).
    public var rejectedByReason: [String: Int] = [:]
    /// Retries after transient failures, as the devices counted them.
    public var retries = 0
    /// Sync rounds and long-polls that ended in an error the device's loop retried later.
    public var failedRounds = 0
    /// Committed change sets received by devices (catch-up and acknowledgements).
    public var received = 0

    public init() {}
}

/// How the devices' bootstraps went: SQLite snapshot files downloaded whole, resumed
/// after a cut (206), and cut mid-way (to be resumed), and JSON snapshots loaded.
public struct SnapshotDownloads: Codable, Sendable, Equatable {
    public var files = 0
    public var resumed = 0
    public var cut = 0
    public var json = 0
    public var failed = 0

    public init() {}

    /// One `/snapshot` exchange: of the SQLite file or not, and its status (nil: cut short).
    mutating func record(sqliteFile: Bool, status: Int?) {
        switch (sqliteFile, status) {
        case (true, 200): files += 1
        case (true, 206): resumed += 1
        case (true, nil): cut += 1
        case (false, 200): json += 1
        default: failed += 1
        }
    }
}

/// HTTP body bytes of all device exchanges, as JSON (raw) and as sent (gzip where used).
public struct ByteCounts: Codable, Sendable, Equatable {
    public var requestRaw = 0
    public var requestWire = 0
    public var responseRaw = 0
    public var responseWire = 0

    public init() {}
}

/// Percentiles of a latency distribution in milliseconds.
public struct LatencyPercentiles: Codable, Sendable, Equatable {
    public var count: Int
    public var p50: Double
    public var p90: Double
    public var p99: Double
    public var max: Double

    public init(count: Int, p50: Double, p90: Double, p99: Double, max: Double) {
        self.count = count
        self.p50 = p50
        self.p90 = p90
        self.p99 = p99
        self.max = max
    }
}

public struct CatchUpLatency: Codable, Sendable, Equatable {
    /// `/sync` exchanges that sent no change set and did not ask the server to wait
    /// (long-polls last as long as the server holds them), timed by the devices through their links.
    public var devices: LatencyPercentiles
    /// The servers' `revsync_catchup_duration_seconds`, from their /metrics (bucket
    /// estimates, summed over instances; nil when no instance could be scraped).
    public var server: LatencyPercentiles?
    /// Of `devices`, those of devices whose instance was cut from Redis as they finished
    /// (`redis_partition`); nil without a partition, and in reports from before it.
    public var whileCutFromRedis: LatencyPercentiles?

    public init(devices: LatencyPercentiles, server: LatencyPercentiles?, whileCutFromRedis: LatencyPercentiles? = nil) {
        self.devices = devices
        self.server = server
        self.whileCutFromRedis = whileCutFromRedis
    }
}

/// Write-to-visible latency (`WriteToVisibleTracker`): from the moment a device has
/// the acknowledgement of its change set, committed at revision R, to the moment
/// each other device that was online then has applied revision R, on one clock.
/// "Online": bootstrapped, link up, not restarting after a crash or a restore, not
/// revoked, from the acknowledgement until it applied R; a device that goes
/// absent first is dropped for R. Server outages count as waiting.
public struct WriteToVisibleLatency: Codable, Sendable, Equatable {
    /// One sample per (revision, other online device), in milliseconds.
    public var latency: LatencyPercentiles
    /// Acknowledged change sets measured (repeated acknowledgements left out).
    public var acknowledgements: Int
    /// Samples of devices that already held the revision when the writer got its
    /// acknowledgement (counted as 0 ms).
    public var seenBeforeAcknowledgement: Int
    /// Device-revision pairs given up because the device went offline, restarted or
    /// was revoked before applying the revision.
    public var dropped: Int
    /// Device-revision pairs still awaited when the run ended (or given up to bound memory).
    public var unresolved: Int

    public init(latency: LatencyPercentiles, acknowledgements: Int, seenBeforeAcknowledgement: Int, dropped: Int, unresolved: Int) {
        self.latency = latency
        self.acknowledgements = acknowledgements
        self.seenBeforeAcknowledgement = seenBeforeAcknowledgement
        self.dropped = dropped
        self.unresolved = unresolved
    }
}

public struct ConvergenceSummary: Codable, Sendable, Equatable {
    /// From healing every fault until every device had an empty outbox and the server's head.
    public var secondsToConverge: Double?
    public var convergedDevices: Int
    /// The devices that had to converge: every device but the revoked ones.
    public var devices: Int
    /// The drain's bound; a device still pending after it fails the run.
    public var boundSeconds: Double
    /// Devices revoked during the run, left out of the drain and the comparison with PostgreSQL.
    public var revokedDevices: Int

    public init(secondsToConverge: Double?, convergedDevices: Int, devices: Int, boundSeconds: Double, revokedDevices: Int = 0) {
        self.secondsToConverge = secondsToConverge
        self.convergedDevices = convergedDevices
        self.devices = devices
        self.boundSeconds = boundSeconds
        self.revokedDevices = revokedDevices
    }
}

/// The run's state at one second.
public struct TimelineSample: Codable, Sendable, Equatable {
    public var t: Double
    public var online: Int
    public var offline: Int
    /// Change sets in all devices' outboxes.
    public var pending: Int
    public var headRevision: Int64
    /// Cumulative.
    public var conflicts: Int
    /// Cumulative failed sync rounds and retries.
    public var errors: Int
    /// Device-side catch-up latency during this second (ms); nil without a sample.
    public var latencyP50: Double?
    public var latencyP99: Double?

    public init(
        t: Double, online: Int, offline: Int, pending: Int, headRevision: Int64, conflicts: Int, errors: Int,
        latencyP50: Double?, latencyP99: Double?
    ) {
        self.t = t
        self.online = online
        self.offline = offline
        self.pending = pending
        self.headRevision = headRevision
        self.conflicts = conflicts
        self.errors = errors
        self.latencyP50 = latencyP50
        self.latencyP99 = latencyP99
    }
}

public struct TimelineEvent: Codable, Sendable, Equatable {
    public var t: Double
    /// A fault kind as in `SoakReport.faults`, or a phase: `workload`, `heal`, `drain`, `verdict`.
    public var kind: String
    public var detail: String

    public init(t: Double, kind: String, detail: String) {
        self.t = t
        self.kind = kind
        self.detail = detail
    }
}
