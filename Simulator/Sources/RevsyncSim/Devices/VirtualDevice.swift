import Foundation
import Logging
import RevsyncDevice
import RevsyncLink
import RevsyncWire

/// One simulated device: a user working on a `SyncEngine` with its own SQLite
/// file, syncing through its own fault-injecting link. It records what the
/// verdict needs as it goes: acknowledged `seq`s and any `maxRevision` that
/// went backwards (also across crashes and restarts from the file).
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
        var pollInterval: Duration
    }

    nonisolated let plan: Plan
    nonisolated let link: FaultyLink
    nonisolated let deviceId: String
    private let transport: HTTPSyncTransport
    private let runner: WorkloadRunner
    private var engine: SyncEngine
    private var random: SplitMix64
    private let signal = WakeSignal()
    private var syncTask: Task<Void, Never>?
    private var workTask: Task<Void, Never>?
    private var pollInterval: Duration

    private(set) var inSync = false
    private(set) var tally = DeviceTally()
    private(set) var acknowledgedSeqs: [Int64] = []
    private(set) var maxRevision: Int64 = 0
    private(set) var regressions: [(from: Int64, to: Int64)] = []
    private(set) var pending = 0
    private(set) var lastError: String?
    private var own: [(entity: String, id: Int64)] = []

    private init(
        plan: Plan, link: FaultyLink, deviceId: String, transport: HTTPSyncTransport, runner: WorkloadRunner, engine: SyncEngine
    ) {
        self.plan = plan
        self.link = link
        self.deviceId = deviceId
        self.transport = transport
        self.runner = runner
        self.engine = engine
        self.random = SplitMix64(seed: plan.seed)
        self.pollInterval = plan.pollInterval
    }

    /// Registers the device (straight to the server: setting up is not under test),
    /// optionally bootstraps it straight from the server too, then opens it on its link.
    /// With `bootstrapThroughLink` the first sync loads the snapshot through the faulty link.
    static func make(
        _ plan: Plan, profile: LinkProfile, serverPort: Int, direct: HTTPSyncTransport, adminToken: String,
        bootstrapThroughLink: Bool, runner: WorkloadRunner, stats: ExchangeStats
    ) async throws -> VirtualDevice {
        let registered = try await direct.register(
            DeviceRegistration(name: plan.name, user: "user-\(plan.index)", role: plan.role), adminToken: adminToken)
        if !bootstrapThroughLink {
            let setup = try SyncEngine(databasePath: plan.databasePath, transport: direct, configuration: configuration(plan))
            try await setup.useToken(registered.token, deviceId: registered.deviceId)
            try await setup.bootstrap()
            try await setup.close()
        }
        let link = try await FaultyLink(profile: profile, seed: plan.seed ^ 0x11_4C, targetPort: serverPort)
        var transportConfiguration = HTTPSyncTransport.Configuration(baseURL: "http://127.0.0.1:\(link.port)")
        transportConfiguration.connectTimeout = .seconds(5)
        transportConfiguration.readTimeout = .seconds(20)
        transportConfiguration.requestTimeout = .seconds(60)
        transportConfiguration.logger.logLevel = .error
        transportConfiguration.observer = { stats.record($0) }
        let transport = HTTPSyncTransport(configuration: transportConfiguration)
        let engine = try SyncEngine(databasePath: plan.databasePath, transport: transport, configuration: configuration(plan))
        if bootstrapThroughLink { try await engine.useToken(registered.token, deviceId: registered.deviceId) }
        return VirtualDevice(plan: plan, link: link, deviceId: registered.deviceId, transport: transport, runner: runner, engine: engine)
    }

    static func configuration(_ plan: Plan) -> SyncEngineConfiguration {
        var configuration = SyncEngineConfiguration()
        configuration.checksPermissionsLocally = plan.checksPermissions
        // Rejections and retries are counted in the report; per-device log lines would drown it.
        configuration.logger.logLevel = .error
        return configuration
    }

    // MARK: Running

    /// Starts syncing and, with `working`, the user's actions.
    func start(working: Bool) {
        if syncTask == nil { syncTask = Task { await self.syncLoop() } }
        if working, workTask == nil { workTask = Task { await self.workLoop() } }
    }

    /// Ends the user's actions; syncing goes on.
    func stopWorking() async {
        workTask?.cancel()
        await workTask?.value
        workTask = nil
    }

    /// Syncs often from now on (the drain) and at once.
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
        let working = workTask != nil
        await stopSyncing()
        try await engine.close()
        engine = try SyncEngine(databasePath: plan.databasePath, transport: transport, configuration: Self.configuration(plan))
        tally.crashes += 1
        await observeStatus()
        start(working: working)
    }

    /// Ends syncing and user actions; the file stays open for the verdict.
    func stopSyncing() async {
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
    func hasConverged(to head: Int64) async -> Bool {
        await observeStatus()
        return pending == 0 && maxRevision >= head
    }

    /// The engine, for the verdict (after `shutdown()` it is closed: read before).
    var syncEngine: SyncEngine { engine }

    // MARK: Loops

    private func syncLoop() async {
        var failures = 0
        while !Task.isCancelled {
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
                try? await Task.sleep(for: .milliseconds(250 * min(20, 1 << min(failures, 5))))
            } else {
                await signal.wait(timeout: pollInterval)
            }
        }
    }

    private func workLoop() async {
        while !Task.isCancelled {
            let pause = plan.thinkTime.inSeconds * exponential()
            do {
                try await Task.sleep(for: .milliseconds(Int(pause * 1000)))
            } catch {
                return
            }
            let action = WorkloadAction.pick(&random)
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
                return
            } catch {
                // E.g. a restrict delete the device's own data forbids: the app would show it; nothing was queued.
                self.random = random
                tally.operations.refusedLocally += 1
            }
        }
    }

    /// A unit-mean exponential draw from the device's sequence.
    private func exponential() -> Double {
        let unit = random.nextUnit()
        return min(8, -log(1 - unit))
    }

    private func observeStatus() async {
        guard let status = try? await engine.status() else { return }
        if status.maxRevision < maxRevision {
            regressions.append((maxRevision, status.maxRevision))
        }
        maxRevision = max(maxRevision, status.maxRevision)
        pending = status.pendingChangeSets
    }
}
