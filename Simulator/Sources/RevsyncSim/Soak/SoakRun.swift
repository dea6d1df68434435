import Foundation
import Logging
import PostgresNIO
import RevsyncDevice
import RevsyncHarness
import RevsyncLink

/// One soak run, phase by phase: a fresh database, the server instances, the
/// seeded dataset, the devices (bootstrapped from `/snapshot`), the workload
/// with its faults, healing, the drain, the verdict and the report.
///
/// ```swift
/// let report = try await SoakRun(settings: settings).run()
/// exit(report.verdict.passed ? 0 : 1)
/// ```
public actor SoakRun {
    public nonisolated let settings: SoakSettings
    let logger: Logger
    let stats = ExchangeStats()
    let visibility = WriteToVisibleRecorder()
    /// Requests the links sent to two instances at once, and whether their answers agreed.
    let splits = SplitAudit()
    let clock = ContinuousClock()

    var devices: [VirtualDevice] = []
    var events: [TimelineEvent] = []
    var faultCounts: [String: Int] = [:]
    var timeline: [TimelineSample] = []
    var head: Int64 = 0
    var phase = "setup"
    var workloadStart: ContinuousClock.Instant?
    var seedIndex = SeedIndex(ids: [:], revision: 0)
    var hot = HotSet(seed: SeedIndex(ids: [:], revision: 0), size: 0)
    var secondsToConverge: Double?
    var convergedDevices = 0
    var injectionFailures: [String] = []
    /// Devices (by index) the run revoked: they cannot converge, so the drain and the comparison leave them out.
    var revokedDevices: Set<Int> = []
    /// Devices (by index) whose token the run rotated: their old token's answers are checked apart.
    var rotatedDevices: Set<Int> = []
    /// The probes of `/ready` asked while PostgreSQL refused the servers more connections.
    var refusalAnswers: [ReadinessAnswer] = []
    /// Work directories found unlocked in the snapshot directory right after a kill: what the
    /// killed instance left, which the others' sweep must remove.
    var workDirectoriesLeftByKills: Set<String> = []
    /// Where the database restore took the log back to, once it was restored.
    var restorePoint: RestorePoint?
    /// The backup the database restore took, put back again by its second restore.
    var databaseBackup: DatabaseBackup?
    /// One relay between each instance (by index) and Redis, when partitions are switched on.
    var redisRelays: [TCPRelay] = []
    /// For each cut from Redis, whether and how soon its instance subscribed anew after the heal.
    var partitionRecoveries: [PartitionRecovery] = []
    /// For each instance whose PostgreSQL connections died silently, how soon both ends gave them up.
    var silentPathRecoveries: [SilentPathRecovery] = []
    var frozenPostgres: [FrozenPostgres] = []
    /// Freezes of PostgreSQL the plan holds: a run may have no moment clear for one (`FaultPlan`).
    var freezesPlanned = 0
    var offlineNow: [Int: Bool] = [:]
    var progressShown = false
    var lastProgressPrint = ContinuousClock.now - .seconds(60)

    public init(settings: SoakSettings, logger: Logger = Logger(label: "revsync.sim")) {
        self.settings = settings
        // PostgresNIO warns when a query waits for a connection being made: expected here, and noise.
        var logger = logger
        logger.logLevel = max(logger.logLevel, .error)
        self.logger = logger
    }

    /// Runs the soak and writes its report; throws only when the run could not be carried out.
    public func run() async throws -> SoakReport {
        let started = clock.now
        let startedAt = ISO8601DateFormatter().string(from: Date())
        let profile = try linkProfile()
        if settings.effectiveFaults.contains(.postgresPathDies) {
            // Before anything starts, not minutes into the run.
            do {
                try await SilentFlows.check()
            } catch {
                throw SoakError("the postgres-path-dies fault (part of --faults all) drops packets with nftables and finds connections "
                    + "with ss: run as root after Scripts/setup (it installs nftables and iproute2), or leave it out of --faults. \(error)")
            }
        }
        if settings.effectiveFaults.contains(.postgresFreezes) {
            do {
                _ = try await PostgresProcesses.of(databaseURL: settings.databaseURL, logger: logger)
            } catch {
                throw SoakError("the postgres-freezes fault (part of --faults all) stops PostgreSQL's processes with signals: "
                    + "run as root on PostgreSQL's host, or leave it out of --faults. \(error)")
            }
        }
        try FileManager.default.createDirectory(atPath: settings.runDirectory, withIntermediateDirectories: true)
        // A run's database is new: files an earlier run left would be another database's, kept for good.
        try? FileManager.default.removeItem(atPath: snapshotDirectory)

        say("seed \(settings.seed): \(settings.devices) devices (+\(settings.joining) joining), \(settings.link) link, "
            + "\(settings.instances) instance(s), \(Int(settings.workload.inSeconds)) s, run directory \(settings.runDirectory)")
        let databaseURL = try await SoakDatabase.recreate(
            settings.databaseName, nextTo: settings.databaseURL, ownRole: settings.effectiveFaults.contains(.postgresRefuses), logger: logger)
        redisRelays = try await startRedisRelays()
        let fleet: ServerFleet
        do {
            fleet = try makeFleet(databaseURL: databaseURL)
        } catch {
            for relay in redisRelays { await relay.stop() }
            throw error
        }
        do {
            try await fleet.start()
            let report = try await runAgainst(fleet, databaseURL: databaseURL, profile: profile, started: started, startedAt: startedAt)
            await fleet.stopAll()
            for relay in redisRelays { await relay.stop() }
            return report
        } catch {
            await eachDevice { await $0.shutdown() }
            await fleet.stopAll()
            for relay in redisRelays { await relay.stop() }
            throw error
        }
    }

    /// One relay per instance in front of Redis, when partitions are switched on: cutting one
    /// partitions that instance alone (`FaultKind.redisPartition`).
    private func startRedisRelays() async throws -> [TCPRelay] {
        guard settings.effectiveFaults.contains(.redisPartition), let url = settings.redisURL else { return [] }
        guard let parts = URLComponents(string: url), let host = parts.host else {
            throw SoakError("the Redis URL \(url) has no host; partitions need one to relay to")
        }
        var relays: [TCPRelay] = []
        do {
            for _ in 0..<settings.instances {
                relays.append(try await TCPRelay.start(to: host, port: parts.port ?? 6379))
            }
        } catch {
            for relay in relays { await relay.stop() }
            throw SoakError("cannot start the relays between the instances and Redis: \(error)")
        }
        return relays
    }

    /// The Redis URL through `relay`: the same URL (database, credentials) on its port.
    private func redisURL(through relay: TCPRelay) -> String? {
        guard let url = settings.redisURL, var parts = URLComponents(string: url) else { return nil }
        parts.host = "127.0.0.1"
        parts.port = relay.port
        return parts.string
    }

    private func runAgainst(
        _ fleet: ServerFleet, databaseURL: String, profile: LinkProfile, started: ContinuousClock.Instant, startedAt: String
    ) async throws -> SoakReport {
        let adminToken = fleet.configuration.adminToken
        phase = "seeding"
        say("seeding about \(settings.seedRecords) records through /sync …")
        seedIndex = try await DatasetSeeder(baseURL: fleet.baseURL(0), adminToken: adminToken).seed(records: settings.seedRecords, seed: settings.seed)
        hot = HotSet(seed: seedIndex, size: settings.hotSetSize)
        head = seedIndex.revision
        say("seeded \(seedIndex.records) records at revision \(seedIndex.revision); bootstrapping \(settings.devices) devices from /snapshot …")

        // Registration and the first bootstrap go straight to the servers; joiners use these too.
        let direct = (0..<fleet.count).map { index in
            HTTPSyncTransport(configuration: .init(baseURL: fleet.baseURL(index)))
        }
        do {
            phase = "bootstrap"
            let bootstrapStarted = clock.now
            try await bootstrapDevices(fleet: fleet, direct: direct, adminToken: adminToken, profile: profile)
            say("bootstrapped \(devices.count) devices in \(format(clock.now - bootstrapStarted))")

            let faults = FaultPlan.make(
                workload: settings.workload, faults: settings.effectiveFaults, instances: fleet.count,
                devices: settings.devices, joining: settings.joining, crashes: settings.crashes, seed: settings.seed)
            freezesPlanned = faults.filter { $0.kind == .postgresFreezes }.count
            if settings.effectiveFaults.contains(.postgresFreezes), freezesPlanned == 0 {
                say("postgres-freezes: no moment of this run is clear of the faults that need PostgreSQL, so it does not freeze "
                    + "(and its check is left out); another seed, or a longer run, has one")
            }

            let report: SoakReport = try await SoakDatabase.withClient(url: databaseURL, logger: logger) { client in
                try await self.workloadHealDrainVerdict(
                    fleet: fleet, client: client, databaseURL: databaseURL, faults: faults, direct: direct,
                    adminToken: adminToken, profile: profile, started: started, startedAt: startedAt)
            }
            for transport in direct { try? await transport.shutdown() }
            return report
        } catch {
            for transport in direct { try? await transport.shutdown() }
            throw error
        }
    }

    private func workloadHealDrainVerdict(
        fleet: ServerFleet, client: PostgresClient, databaseURL: String, faults: [ScheduledFault], direct: [HTTPSyncTransport],
        adminToken: String, profile: LinkProfile, started: ContinuousClock.Instant, startedAt: String
    ) async throws -> SoakReport {
        let sampler = Task { await self.sampleEverySecond(client: client) }
        defer { sampler.cancel() }

        // Workload, with the planned faults injected alongside.
        workloadStart = clock.now
        phase = "workload"
        note("workload", "\(devices.count) devices start working")
        await eachDevice { await $0.start(working: true) }
        let injector = Task {
            await self.inject(faults, fleet: fleet, direct: direct, adminToken: adminToken, profile: profile)
        }
        try? await Task.sleep(for: settings.workload)
        injector.cancel()
        await injector.value

        // Heal: every server up, every link clean, no more user actions.
        phase = "heal"
        note("heal", "faults end; user actions stop")
        await eachDevice { await $0.stopWorking() }
        try await heal(fleet)
        await eachDevice { device in
            device.link.heal()
            await device.syncEagerly(every: .seconds(1))
        }

        // Drain: wait until every device sent everything and holds the head.
        phase = "drain"
        note("drain", "waiting for \(devices.count) devices to converge (bound \(Int(settings.drainBound.inSeconds)) s)")
        let stuck = try await drain(client: client)
        sampler.cancel()
        await sampler.value
        if let metrics = fleet.metrics { await metrics.scrapeAll() }

        phase = "verdict"
        note("verdict", "comparing every device with PostgreSQL")
        await eachDevice { await $0.stopSyncing() }
        let checks = try await verdict(databaseURL: databaseURL, stuck: stuck)
        let serverLatency = await fleet.metrics?.catchUpLatency()
        await eachDevice { await $0.shutdown() }
        return try await makeReport(
            checks: checks, serverLatency: serverLatency, started: started, startedAt: startedAt)
    }

    // MARK: Phases

    private func bootstrapDevices(fleet: ServerFleet, direct: [HTTPSyncTransport], adminToken: String, profile: LinkProfile) async throws {
        let count = settings.devices
        var made: [Int: VirtualDevice] = [:]
        try await withThrowingTaskGroup(of: (Int, VirtualDevice).self) { group in
            var next = 0
            func add() {
                let index = next
                next += 1
                group.addTask {
                    let device = try await self.makeDevice(
                        index, fleet: fleet, direct: direct, adminToken: adminToken, profile: profile, throughLink: false)
                    return (index, device)
                }
            }
            while next < min(count, max(1, settings.bootstrapConcurrency)) { add() }
            while let (index, device) = try await group.next() {
                made[index] = device
                if next < count { add() }
                progressText("bootstrap: \(made.count) of \(count) devices loaded the snapshot")
            }
        }
        devices = (0..<count).compactMap { made[$0] }
        endProgressLine()
    }

    func makeDevice(
        _ index: Int, fleet: ServerFleet, direct: [HTTPSyncTransport], adminToken: String, profile: LinkProfile, throughLink: Bool
    ) async throws -> VirtualDevice {
        let instance = index % fleet.count
        // Every tenth device is an admin; a third of the members use an app that skips the local
        // permission check, so the server's `forbidden` path and its corrective sets get exercised.
        let role = DeviceRole.of(index)
        let plan = VirtualDevice.Plan(
            index: index, name: "sim-\(index)", role: role, checksPermissions: role == DeviceRole.admin || index % 3 != 1,
            databasePath: settings.runDirectory + "/devices/device-\(index).sqlite",
            seed: settings.seed &+ UInt64(index) &* 0x9E37_79B9, thinkTime: settings.thinkTime, pollInterval: .seconds(5),
            wait: settings.longPollWait)
        try FileManager.default.createDirectory(atPath: settings.runDirectory + "/devices", withIntermediateDirectories: true)
        try? FileManager.default.removeItem(atPath: plan.databasePath)
        let port = fleet.configuration.ports[instance]
        // A split request also goes to the next instance, as a load balancer retrying it there would send it.
        let other = fleet.count > 1 ? fleet.configuration.ports[(instance + 1) % fleet.count] : nil
        return try await VirtualDevice.make(
            plan, profile: profile, serverPort: port, instance: instance, splitPort: other, splits: splits, direct: direct[instance], adminToken: adminToken,
            bootstrapThroughLink: throughLink, runner: WorkloadRunner(seed: seedIndex, hot: hot, role: role), stats: stats,
            visibility: visibility)
    }

    /// Starts every stopped instance, heals every relay to Redis, and waits until Redis and
    /// PostgreSQL answer.
    private func heal(_ fleet: ServerFleet) async throws {
        // A partition heals itself at its end; this is for one the workload's end cut short.
        for relay in redisRelays { relay.heal() }
        for index in 0..<fleet.count where await !fleet.isRunning(index) {
            try await fleet.restart(index)
        }
        let stack = stackControl()
        try await stack.waitUntilPostgresAnswers()
        if settings.redisURL != nil { try await stack.waitUntilRedisAnswers() }
    }

    /// Returns the devices (by index) that had not converged when the bound ran out.
    private func drain(client: PostgresClient) async throws -> [Int] {
        let start = clock.now
        let deadline = start + settings.drainBound
        while true {
            let state = await SoakDatabase.state(client, logger: logger)
            let head = state?.head ?? self.head
            self.head = head
            let history = state?.history
            var waiting: [Int] = []
            for (index, device) in devices.enumerated() where !revokedDevices.contains(index) {
                if await !device.hasConverged(to: head, history: history) { waiting.append(index) }
            }
            convergedDevices = devices.count - revokedDevices.count - waiting.count
            if waiting.isEmpty {
                secondsToConverge = (clock.now - start).inSeconds
                note("drain", "every device converged in \(format(clock.now - start))")
                return []
            }
            if clock.now >= deadline {
                note("drain", "\(waiting.count) devices did not converge within the bound")
                return waiting
            }
            try await Task.sleep(for: .seconds(1))
        }
    }

    private func verdict(databaseURL: String, stuck: [Int]) async throws -> [VerdictCheck] {
        var acknowledged: Set<ChangeSetRef> = []
        var content: [AcknowledgedChangeSet] = []
        var regressions: [RevisionRegression] = []
        var revoked: [RevokedDevice] = []
        var rotated: [RevokedDevice] = []
        var excused: Set<ChangeSetRef> = []
        var authorForms: [String: [Int64]] = [:]
        // What a database restore took away is not the database's to hold (`RestorePoint`): set apart.
        var lostWithRestore: [AcknowledgedChangeSet] = []
        var regressionsAtRestore = 0
        for (index, device) in devices.enumerated() {
            let ledger = device.ledger.acknowledged(by: device.deviceId, besides: restorePoint)
            content += ledger.kept
            lostWithRestore += ledger.lost
            let keptSeqs = Set(ledger.kept.map(\.seq))
            let lostSeqs = Set(ledger.lost.map(\.seq)).subtracting(keptSeqs)
            for seq in await device.acknowledgedSeqs where !lostSeqs.contains(seq) {
                acknowledged.insert(ChangeSetRef(device: device.deviceId, seq: seq))
            }
            authorForms[device.deviceId, default: []] += device.ledger.authorFormRevisions(besides: restorePoint)
            for (from, to) in await device.regressions {
                // A device that held revisions the restore took away goes back to the restored line.
                if let restorePoint, from > restorePoint.head {
                    regressionsAtRestore += 1
                    continue
                }
                regressions.append(RevisionRegression(device: device.deviceId, from: from, to: to))
            }
            if let summary = device.revocation.summary(device: device.deviceId) {
                if rotatedDevices.contains(index) { rotated.append(summary) } else { revoked.append(summary) }
            }
            for seq in await device.excusedRejectionSeqs { excused.insert(ChangeSetRef(device: device.deviceId, seq: seq)) }
        }
        var engines: [any VerdictDevice] = []
        for device in devices { engines.append(await device.syncEngine) }
        var checks = try await VerdictGatherer(databaseURL: databaseURL, logger: logger).checks(
            devices: engines, acknowledged: acknowledged, regressions: regressions, acknowledgedContent: content,
            revoked: revoked, excusedRejections: excused, authorForms: authorForms)
        checks.append(VerdictChecks.splitRequests(splits.tally))
        if settings.effectiveFaults.contains(.postgresRefuses) { checks.append(VerdictChecks.servedWhileRefused(refusalAnswers)) }
        if settings.effectiveFaults.contains(.deviceRotate) { checks.append(VerdictChecks.rotatedTokens(rotated)) }
        if settings.effectiveFaults.contains(.redisPartition) { checks.append(VerdictChecks.redisPartitions(partitionRecoveries)) }
        if settings.effectiveFaults.contains(.postgresPathDies) { checks.append(VerdictChecks.silentPostgresPaths(silentPathRecoveries)) }
        if settings.effectiveFaults.contains(.postgresFreezes), freezesPlanned > 0 { checks.append(VerdictChecks.frozenPostgres(frozenPostgres)) }
        if settings.effectiveFaults.contains(.schemaUpgrade) {
            checks.append(VerdictChecks.schemaUpgrade(try await SchemaUpgrade.audit(databaseURL, logger: logger)))
        }
        checks.append(VerdictChecks.snapshotDirectory(SnapshotDirectoryAudit.read(snapshotDirectory), leftByKills: workDirectoriesLeftByKills))
        if settings.effectiveFaults.contains(.databaseRestore) {
            var histories: [String?] = []
            for (index, device) in devices.enumerated() where !revokedDevices.contains(index) {
                histories.append(try? await device.syncEngine.status().history)
            }
            let logger = self.logger
            let current = try await SoakDatabase.withClient(url: databaseURL, logger: logger) { await SoakDatabase.history($0, logger: logger) }
            checks.append(VerdictChecks.databaseRestore(
                restorePoint, current: current, deviceHistories: histories, lostAcknowledgements: lostWithRestore.count,
                regressions: regressionsAtRestore))
        }
        if !stuck.isEmpty {
            var details: [String] = []
            for index in stuck.prefix(5) {
                let device = devices[index]
                details.append("\(device.plan.name): pending \(await device.pending), maxRevision \(await device.maxRevision)/\(head), "
                    + "last error: \(await device.lastError ?? "none")")
            }
            checks.append(VerdictCheck(
                name: "drain", passed: false,
                detail: "\(stuck.count) of \(devices.count - revokedDevices.count) devices had not converged "
                    + "\(Int(settings.drainBound.inSeconds)) s after healing: "
                    + details.joined(separator: "; ")))
        }
        return checks
    }

    // MARK: Helpers

    /// Runs `body` on every device at once: one device at a time took minutes with
    /// 1,000 devices, while those not reached yet kept working.
    func eachDevice(_ body: @escaping @Sendable (VirtualDevice) async -> Void) async {
        let devices = self.devices
        await withTaskGroup(of: Void.self) { group in
            for device in devices { group.addTask { await body(device) } }
        }
    }

    func linkProfile() throws -> LinkProfile {
        guard let profile = LinkProfile.preset(named: settings.link) else {
            throw SoakError("--link must be good, wifi or terrible, not \"\(settings.link)\"")
        }
        return settings.linkKnobs.apply(to: profile)
    }

    private func makeFleet(databaseURL: String) throws -> ServerFleet {
        let ports = try settings.serverPorts ?? FreePort.loopback(count: settings.instances)
        guard ports.count == settings.instances else {
            throw SoakError("\(settings.instances) instances need \(settings.instances) ports, got \(ports.count)")
        }
        // One snapshot directory for every instance, as on a host that runs several: they build
        // files once between them, and each sweeps what the others replaced or left when killed.
        var configuration = ServerFleetConfiguration(
            executable: settings.serverExecutable, ports: ports, databaseURL: databaseURL, redisURL: settings.redisURL,
            adminToken: "soak-" + UUID().uuidString, schemaPath: settings.schemaPath, runDirectory: settings.runDirectory,
            extraEnvironment: [
                "REVSYNC_SNAPSHOT_DIR": snapshotDirectory,
                "REVSYNC_SNAPSHOT_KEEP_REPLACED_SECONDS": String(SnapshotDirectoryAudit.keepReplacedSeconds),
                "REVSYNC_SNAPSHOT_MAX_AGE_SECONDS": String(SnapshotDirectoryAudit.maxAgeSeconds),
            ])
        for (index, relay) in redisRelays.enumerated() { configuration.instanceRedisURLs[index] = redisURL(through: relay) }
        return ServerFleet(configuration: configuration, metrics: ServerFleet.scraper(for: configuration))
    }

    /// The SQLite snapshot directory the instances share.
    var snapshotDirectory: String { settings.runDirectory + "/snapshots" }

    func stackControl() -> StackControl {
        var stack = StackControl(
            repositoryRoot: "/", redisURL: settings.redisURL ?? "", databaseURL: settings.databaseURL,
            logPath: settings.runDirectory + "/stack.log")
        stack.restartRedisCommand = settings.restartRedisCommand
        stack.restartPostgresCommand = settings.restartPostgresCommand
        return stack
    }

    /// Records a fault or phase on the timeline (and prints it).
    func note(_ kind: String, _ detail: String) {
        let t = workloadStart.map { (clock.now - $0).inSeconds } ?? 0
        events.append(TimelineEvent(t: t, kind: kind, detail: detail))
        if FaultKind(rawValue: kind) != nil { faultCounts[kind, default: 0] += 1 }
        endProgressLine()
        say(String(format: "[%5.0fs] %@: %@", t, kind, detail))
    }

    nonisolated func say(_ line: String) {
        FileHandle.standardError.write(Data((line + "\n").utf8))
    }

    func format(_ duration: Duration) -> String {
        String(format: "%.1f s", duration.inSeconds)
    }
}
