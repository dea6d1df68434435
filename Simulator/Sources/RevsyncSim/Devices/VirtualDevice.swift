import Foundation
import Logging
import RevsyncDevice
import RevsyncLink
import RevsyncWire

/// One simulated device: a user working on a `SyncEngine` with its own SQLite
/// file, syncing through its own fault-injecting link. It records what the
/// verdict needs as it goes: acknowledged `seq`s and what each carried, any
/// `maxRevision` that went backwards (also across crashes and restarts from
/// the file), and the answers its token got once it was revoked.
actor VirtualDevice {
    struct Plan: Sendable {
        var index: Int
        var name: String
        var role: String
        /// Whether the app checks the role's permissions before the server does.
        var checksPermissions: Bool
        var databasePath: String
        var seed: UInt64
        /// Mean pause between two user actions.
        var thinkTime: Duration
        /// Between two catch-ups without a local change, when not long-polling.
        var pollInterval: Duration
        /// How long the server may hold a catch-up (long-poll); zero: poll every `pollInterval`.
        var wait: Duration = .zero
    }

    nonisolated let plan: Plan
    nonisolated let link: FaultyLink
    nonisolated let deviceId: String
    /// What each acknowledgement answered, by content (kept across engines).
    nonisolated let ledger: AcknowledgementLedger
    nonisolated let revocation: RevocationWatch
    /// The run's write-to-visible latency, told of this device's revisions and absences.
    nonisolated let visibility: WriteToVisibleRecorder
    private let transport: HTTPSyncTransport
    /// `transport`, telling `ledger` what was acknowledged: what every engine of the device uses.
    private let engineTransport: RecordingTransport
    private let runner: WorkloadRunner
    var engine: SyncEngine
    private var random: SplitMix64
    private let signal = WakeSignal()
    private var syncTask: Task<Void, Never>?
    private var workTask: Task<Void, Never>?
    private var pollInterval: Duration
    /// Whether the user is meant to be acting: a restart after a crash or a restore resumes it.
    private var working = false
    // A crash and a restore both replace the engine: one at a time.
    private var engineBusy = false
    private var replaceWaiters: [CheckedContinuation<Void, Never>] = []
    /// The copy of the file a planned restore puts back.
    var restorePoint: RestorePoint?

    private(set) var inSync = false
    private(set) var tally = DeviceTally()
    private(set) var acknowledgedSeqs: [Int64] = []
    /// The highest revision seen; a restore sets it back to the copy's.
    var maxRevision: Int64 = 0
    private(set) var regressions: [(from: Int64, to: Int64)] = []
    var pending = 0
    private(set) var lastError: String?
    /// Rejections the device cannot show as stored conflicts because a restore replaced
    /// its file: those it held then, and its change sets the restore abandoned.
    var excusedRejectionSeqs: Set<Int64> = []
    private var own: [(entity: String, id: Int64)] = []

    private init(
        plan: Plan, link: FaultyLink, deviceId: String, transport: HTTPSyncTransport, engineTransport: RecordingTransport,
        revocation: RevocationWatch, visibility: WriteToVisibleRecorder, runner: WorkloadRunner, engine: SyncEngine
    ) {
        self.plan = plan
        self.link = link
        self.deviceId = deviceId
        self.ledger = engineTransport.ledger
        self.revocation = revocation
        self.visibility = visibility
        self.transport = transport
        self.engineTransport = engineTransport
        self.runner = runner
        self.engine = engine
        self.random = SplitMix64(seed: plan.seed)
        self.pollInterval = plan.pollInterval
    }

    /// `POST /devices`, tried again for up to 60 s while the instance does not answer or answers
    /// a 5xx, as an operator's tool would: a device joins at any moment of a run, and the instance
    /// may be being killed then (a CI soak's join fell on a kill), or PostgreSQL frozen
    /// (``FrozenPostgres/span``). A retry after a lost answer
    /// registers a second device whose token nobody uses; that one has nothing to compare.
    private static func register(_ plan: Plan, direct: HTTPSyncTransport, adminToken: String) async throws -> RegisteredDevice {
        let deadline = ContinuousClock.now + .seconds(60)
        while true {
            do {
                return try await direct.register(
                    DeviceRegistration(name: plan.name, user: "user-\(plan.index)", role: plan.role), adminToken: adminToken)
            } catch let error as SyncTransportError where error.isRetryable && ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(250))
            }
        }
    }

    /// Registers the device (straight to the server: setting up is not under test),
    /// optionally bootstraps it straight from the server too, then opens it on its link.
    /// With `bootstrapThroughLink` the first sync loads the snapshot through the faulty link.
    static func make(
        _ plan: Plan, profile: LinkProfile, serverPort: Int, instance: Int? = nil, splitPort: Int? = nil, splits: SplitAudit? = nil,
        direct: HTTPSyncTransport, adminToken: String,
        bootstrapThroughLink: Bool, runner: WorkloadRunner, stats: ExchangeStats, visibility: WriteToVisibleRecorder
    ) async throws -> VirtualDevice {
        let registered = try await register(plan, direct: direct, adminToken: adminToken)
        if !bootstrapThroughLink {
            let setup = try SyncEngine(
                databasePath: plan.databasePath, transport: direct, configuration: configuration(plan, visibility: visibility))
            try await setup.useToken(registered.token, deviceId: registered.deviceId)
            try await setup.bootstrap()
            try await setup.close()
        }
        let index = plan.index
        var onSplit: (@Sendable (SplitExchange) -> Void)?
        if let splits { onSplit = { splits.record($0) } }
        let link = try await FaultyLink(
            profile: profile, seed: plan.seed ^ 0x11_4C, targetPort: serverPort, splitTargetPort: splitPort,
            onSplit: onSplit,
            onOfflineChange: { offline in visibility.setAbsent(.linkOffline, offline, device: index) })
        var transportConfiguration = HTTPSyncTransport.Configuration(baseURL: "http://127.0.0.1:\(link.port)")
        transportConfiguration.connectTimeout = .seconds(5)
        // The server sends nothing while it holds a long-poll, and a duplicated request
        // (a link fault) is held twice before its first answer comes back.
        transportConfiguration.readTimeout = max(.seconds(20), plan.wait * 2 + .seconds(10))
        transportConfiguration.requestTimeout = .seconds(60)
        transportConfiguration.logger.logLevel = .error
        let revocation = RevocationWatch()
        transportConfiguration.observer = { exchange in
            stats.record(exchange, instance: instance)
            revocation.record(exchange)
        }
        let transport = HTTPSyncTransport(configuration: transportConfiguration)
        let engineTransport = RecordingTransport(
            base: transport, ledger: AcknowledgementLedger(),
            onAcknowledged: { revisions in visibility.acknowledged(revisions, by: index) },
            trace: ExchangeTrace.ifEnabled(path: plan.databasePath + ".trace"))
        let engine = try SyncEngine(
            databasePath: plan.databasePath, transport: engineTransport, configuration: configuration(plan, visibility: visibility))
        if bootstrapThroughLink { try await engine.useToken(registered.token, deviceId: registered.deviceId) }
        return VirtualDevice(
            plan: plan, link: link, deviceId: registered.deviceId, transport: transport, engineTransport: engineTransport,
            revocation: revocation, visibility: visibility, runner: runner, engine: engine)
    }

    /// A new engine on the device's file, as after a restart of the app.
    func openEngine() throws -> SyncEngine {
        try SyncEngine(
            databasePath: plan.databasePath, transport: engineTransport, configuration: Self.configuration(plan, visibility: visibility))
    }

    static func configuration(_ plan: Plan, visibility: WriteToVisibleRecorder) -> SyncEngineConfiguration {
        var configuration = SyncEngineConfiguration()
        configuration.checksPermissionsLocally = plan.checksPermissions
        configuration.wait = plan.wait
        configuration.pollInterval = plan.pollInterval
        let index = plan.index
        configuration.revisionObserver = { revision in visibility.applied(revision, on: index) }
        // Rejections and retries are counted in the report; per-device log lines would drown it.
        configuration.logger.logLevel = .error
        return configuration
    }

    // MARK: Running

    /// Starts syncing and, with `working`, the user's actions.
    func start(working: Bool) {
        if working { self.working = true }
        if syncTask == nil { syncTask = Task { await self.syncLoop() } }
        if self.working, workTask == nil { workTask = Task { await self.workLoop() } }
    }

    /// Ends the user's actions; syncing goes on.
    func stopWorking() async {
        working = false
        workTask?.cancel()
        await workTask?.value
        workTask = nil
    }

    /// Syncs often from now on (the drain) and at once. A long-polling device already
    /// hears of every commit as it happens; this shortens its polls if its server
    /// does not hold requests.
    func syncEagerly(every interval: Duration) async {
        pollInterval = interval
        await signal.wake()
    }

    /// Kills the device mid-sync (cancelling whatever it was doing) and restarts
    /// it from its SQLite file, as an app killed by the OS and launched again.
    func crash() async throws {
        // Aim for the middle of a sync: wait (briefly) for one to be in flight.
        for _ in 0..<50 where !inSync {
            try? await Task.sleep(for: .milliseconds(100))
        }
        try await replacingEngine {
            try await self.engine.close()
            self.engine = try self.openEngine()
            self.tally.crashes += 1
            await self.observeStatus()
        }
    }

    /// Gives the engine a new token, as an app does once its user signs in again after the
    /// device's token was rotated; between engine replacements, like them.
    func useToken(_ token: String) async throws {
        try await replacingEngine { try await self.engine.useToken(token, deviceId: self.deviceId) }
    }

    /// Runs `body` with the loops stopped (syncing and, if it was on, working), one
    /// engine replacement at a time, and starts them again after it, even if it throws.
    func replacingEngine<T: Sendable>(_ body: () async throws -> T) async throws -> T {
        if engineBusy {
            await withCheckedContinuation { replaceWaiters.append($0) }
        } else {
            engineBusy = true
        }
        defer {
            if replaceWaiters.isEmpty { engineBusy = false } else { replaceWaiters.removeFirst().resume() }
        }
        // Not applying anything meanwhile: left out of write-to-visible latency until it runs again.
        visibility.setAbsent(.restarting, true, device: plan.index)
        await stopLoops()
        defer {
            start(working: false)
            visibility.setAbsent(.restarting, false, device: plan.index)
        }
        return try await body()
    }

    /// Ends syncing and user actions; the file stays open for the verdict.
    func stopSyncing() async {
        working = false
        await stopLoops()
    }

    /// Ends both loops, leaving `working` as it is.
    private func stopLoops() async {
        syncTask?.cancel()
        workTask?.cancel()
        await syncTask?.value
        await workTask?.value
        syncTask = nil
        workTask = nil
        inSync = false
    }

    /// Stops everything and closes the file, the transport and the link.
    func shutdown() async {
        await stopSyncing()
        try? await engine.close()
        try? await transport.shutdown()
        try? await link.shutdown()
    }

    /// Whether the device has sent everything and holds revision `head`.
    /// - Parameter history: the database's history id, when known: a device still holding
    ///   another (a waiter of the old line, say) has not converged, whatever its revision.
    func hasConverged(to head: Int64, history: String? = nil) async -> Bool {
        guard let status = await observeStatus() else { return false }
        // The revision it holds now, not the highest seen: after a restore it goes back.
        return pending == 0 && status.maxRevision >= head && (history == nil || status.history == history)
    }

    /// The engine, for the verdict (after `shutdown()` it is closed: read before).
    var syncEngine: SyncEngine { engine }

    // MARK: Loops

    /// Rounds when there is something to send (or after a failure), and between them a
    /// long-poll (`plan.wait`) or, with no wait, a pause of `pollInterval` that a user
    /// action ends: what `SyncEngine.run()` does, with the figures the run needs.
    private func syncLoop() async {
        var failures = 0
        var roundNeeded = true
        while !Task.isCancelled {
            if roundNeeded {
                inSync = true
                do {
                    let report = try await engine.syncOnce()
                    tally.add(report)
                    acknowledgedSeqs += report.acknowledged
                    failures = 0
                } catch is CancellationError {
                    inSync = false
                    return
                } catch {
                    if Task.isCancelled {
                        inSync = false
                        return
                    }
                    failures += 1
                    tally.changeSets.failedRounds += 1
                    lastError = "\(error)"
                }
                inSync = false
                await observeStatus()
                if failures > 0 {
                    // The engine already backed off inside syncOnce; a short pause before the next round.
                    await pauseAfter(failures: failures)
                    continue
                }
            }
            roundNeeded = true
            guard plan.wait > .zero else {
                await signal.wait(timeout: pollInterval)
                continue
            }
            do {
                switch try await engine.waitForServerChanges(upTo: plan.wait) {
                case .received(let report):
                    tally.addLongPoll(report)
                    acknowledgedSeqs += report.acknowledged
                    roundNeeded = false
                    await observeStatus()
                case .nothingNew(held: true):
                    tally.addLongPoll(nil)
                    roundNeeded = false
                case .nothingNew(held: false):
                    // A server that does not hold requests: poll as without a wait.
                    tally.addLongPoll(nil)
                    await signal.wait(timeout: pollInterval)
                case .interrupted:
                    break
                }
            } catch is CancellationError {
                return
            } catch {
                if Task.isCancelled { return }
                // Offline, a reset link, a killed server: a round (which retries) comes next.
                tally.changeSets.failedRounds += 1
                lastError = "\(error)"
                await pauseAfter(failures: 1)
            }
        }
    }

    private func pauseAfter(failures: Int) async {
        try? await Task.sleep(for: .milliseconds(250 * min(20, 1 << min(failures, 5))))
    }

    private func workLoop() async {
        while !Task.isCancelled {
            let pause = plan.thinkTime.inSeconds * exponential()
            do {
                try await Task.sleep(for: .milliseconds(Int(pause * 1000)))
            } catch {
                return
            }
            guard await act(WorkloadAction.pick(&random)) else { return }
        }
    }

    /// Runs one user action now, as the work loop does; false when cancelled.
    @discardableResult
    func act(_ action: WorkloadAction) async -> Bool {
        var random = self.random
        let offline = link.isOffline
        do {
            let result = try await runner.run(action, on: engine, own: own, random: &random)
            self.random = random
            if let result, !result.isEmpty {
                tally.add(result, offline: offline)
                own += result.created
                if own.count > 200 { own.removeFirst(own.count - 200) }
                await signal.wake()
            }
        } catch is CancellationError {
            return false
        } catch {
            // E.g. a restrict delete the device's own data forbids: the app would show it; nothing was queued.
            self.random = random
            tally.operations.refusedLocally += 1
        }
        return true
    }

    /// A unit-mean exponential draw from the device's sequence.
    private func exponential() -> Double {
        let unit = random.nextUnit()
        return min(8, -log(1 - unit))
    }

    @discardableResult
    func observeStatus() async -> DeviceStatus? {
        guard let status = try? await engine.status() else { return nil }
        if status.maxRevision < maxRevision {
            regressions.append((maxRevision, status.maxRevision))
        }
        maxRevision = max(maxRevision, status.maxRevision)
        pending = status.pendingChangeSets
        return status
    }
}
