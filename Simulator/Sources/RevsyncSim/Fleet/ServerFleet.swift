import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Runs `revsync serve` processes on loopback ports and kills and restarts them on demand.
///
/// ``start()`` runs `revsync migrate` once, then starts every instance, so instances never
/// migrate the same database at the same time (each `serve` still checks, and finds nothing
/// to do). Each instance appends its output to `server-<index>.log` in the run directory.
/// Call ``stopAll()`` when done: the processes outlive the fleet otherwise.
///
/// With a ``ServerMetricsScraper``, the fleet scrapes an instance right before killing or
/// stopping it and retires its counts, since the new process counts from zero.
///
/// The actor suspends while it waits for processes, so calls may interleave: drive the
/// kills and restarts of one instance from one task at a time.
public actor ServerFleet {
    public nonisolated let configuration: ServerFleetConfiguration
    public nonisolated let metrics: ServerMetricsScraper?
    private var processes: [Process?]
    /// The schema file the instances run once ``upgradeSchema(to:pause:onRestarted:)`` migrated to it.
    private var upgradedSchema: String?

    public init(configuration: ServerFleetConfiguration, metrics: ServerMetricsScraper? = nil) {
        self.configuration = configuration
        self.metrics = metrics
        self.processes = Array(repeating: nil, count: configuration.ports.count)
    }

    /// A scraper for this configuration's instances, with `AsyncHTTPClient.HTTPClient.shared`.
    public static func scraper(for configuration: ServerFleetConfiguration) -> ServerMetricsScraper {
        ServerMetricsScraper(baseURLs: configuration.ports.map { "http://127.0.0.1:\($0)" })
    }

    /// Number of instances, running or not.
    public nonisolated var count: Int { configuration.ports.count }

    /// `http://127.0.0.1:<port>` of the instance.
    public nonisolated func baseURL(_ index: Int) -> String {
        "http://127.0.0.1:\(configuration.ports[index])"
    }

    /// The instance's log file (appended across restarts).
    public nonisolated func logPath(_ index: Int) -> String {
        URL(fileURLWithPath: configuration.runDirectory).appendingPathComponent("server-\(index).log").path
    }

    /// Whether the instance's process runs (it may not be ready).
    public func isRunning(_ index: Int) -> Bool {
        processes[index]?.isRunning ?? false
    }

    /// Process id of the running instance.
    public func processIdentifier(_ index: Int) -> Int32? {
        guard let process = processes[index], process.isRunning else { return nil }
        return process.processIdentifier
    }

    /// Migrates the database, starts every instance and waits until each is ready.
    /// On failure the instances already started are stopped again.
    public func start() async throws {
        guard FileManager.default.isExecutableFile(atPath: configuration.executable) else {
            throw FleetError("the server executable \(configuration.executable) does not exist or is not executable; build it with `swift build`")
        }
        do {
            try FileManager.default.createDirectory(atPath: configuration.runDirectory, withIntermediateDirectories: true)
        } catch {
            throw FleetError("cannot create the run directory \(configuration.runDirectory): \(error)")
        }
        try await migrate()
        do {
            for index in processes.indices where processes[index] == nil {
                processes[index] = try launch(index)
            }
            for index in processes.indices {
                try await waitUntilReady(index)
            }
        } catch {
            await stopAll()
            throw error
        }
    }

    /// Kills the instance with SIGKILL, as a crash would, and waits until the process is reaped.
    public func kill(_ index: Int) async throws {
        guard let process = processes[index] else { return }
        if let metrics, process.isRunning { await metrics.scrape(index) }
        ChildProcess.send(SIGKILL, to: process)
        guard await ChildProcess.waitForExit(process, within: .seconds(30)) else {
            throw FleetError("instance \(index) (pid \(process.processIdentifier), port \(configuration.ports[index])) still runs 30 s after SIGKILL")
        }
        processes[index] = nil
        await metrics?.retire(index)
    }

    /// Starts the instance again on its port (killing it first if it still runs) and waits until it is ready.
    public func restart(_ index: Int) async throws {
        if processes[index] != nil { try await kill(index) }
        processes[index] = try launch(index)
        try await waitUntilReady(index)
    }

    /// A rolling schema upgrade, as an operator runs one: `revsync migrate` with the schema at
    /// `path`, then each instance stopped with SIGTERM and started again with it, one at a time,
    /// `pause` apart, so that for a while instances of both schemas serve the same database.
    /// Instances started later (after a kill) run it too.
    public func upgradeSchema(to path: String, pause: Duration, onRestarted: @Sendable (Int) async -> Void) async throws {
        upgradedSchema = path
        try await migrate()
        for index in processes.indices {
            try? await Task.sleep(for: pause)
            if let process = processes[index] {
                if let metrics, process.isRunning { await metrics.scrape(index) }
                ChildProcess.send(SIGTERM, to: process)
                if !(await ChildProcess.waitForExit(process, within: configuration.stopGracePeriod)) {
                    ChildProcess.send(SIGKILL, to: process)
                    _ = await ChildProcess.waitForExit(process, within: .seconds(10))
                }
                processes[index] = nil
                await metrics?.retire(index)
            }
            processes[index] = try launch(index)
            try await waitUntilReady(index)
            await onRestarted(index)
        }
    }

    /// The configuration's environment (of one instance, or of `migrate`), with the upgraded
    /// schema once there is one.
    private func environment(ofInstance index: Int? = nil) -> [String: String] {
        var environment = index.map(configuration.environment(ofInstance:)) ?? configuration.environment
        if let upgradedSchema { environment["REVSYNC_SCHEMA"] = upgradedSchema }
        return environment
    }

    /// SIGTERM to every running instance, SIGKILL to those still running after the grace period.
    public func stopAll() async {
        let running = processes.indices.compactMap { index in processes[index].map { (index, $0) } }
        if let metrics {
            await withTaskGroup(of: Void.self) { group in
                for (index, process) in running where process.isRunning {
                    group.addTask { await metrics.scrape(index) }
                }
            }
        }
        for (_, process) in running { ChildProcess.send(SIGTERM, to: process) }
        // One grace period for all of them, not one each.
        let graceEnds = ContinuousClock.now + configuration.stopGracePeriod
        for (_, process) in running {
            let remaining = Swift.max(graceEnds - ContinuousClock.now, .zero)
            if await ChildProcess.waitForExit(process, within: remaining) { continue }
            ChildProcess.send(SIGKILL, to: process)
            _ = await ChildProcess.waitForExit(process, within: .seconds(10))
        }
        for (index, _) in running {
            processes[index] = nil
            await metrics?.retire(index)
        }
    }

    private func migrate() async throws {
        let logPath = URL(fileURLWithPath: configuration.runDirectory).appendingPathComponent("migrate.log").path
        let status = try await CommandRunner.run(
            [configuration.executable, "migrate"], environment: environment(), logPath: logPath,
            timeout: configuration.migrateTimeout)
        guard status == 0 else {
            throw FleetError("`revsync migrate` failed (exit status \(status)); log \(logPath):\n\(LogTail.lastLines(of: logPath))")
        }
    }

    private func launch(_ index: Int) throws -> Process {
        try ChildProcess.launch(
            executable: configuration.executable, arguments: ["serve", "--listen", "127.0.0.1:\(configuration.ports[index])"],
            environment: environment(ofInstance: index), logPath: logPath(index))
    }

    /// Polls `GET /ready` until it answers 200; fails early if the process exits.
    private func waitUntilReady(_ index: Int) async throws {
        guard let process = processes[index] else { throw FleetError("instance \(index) is not running") }
        let url = baseURL(index) + "/ready"
        let deadline = ContinuousClock.now + configuration.readyTimeout
        while true {
            if !process.isRunning {
                _ = await ChildProcess.waitForExit(process, within: .seconds(1))
                processes[index] = nil
                throw failure(index, "exited with status \(process.terminationStatus) before it was ready")
            }
            if await ReadinessProbe.isReady(url) { return }
            guard ContinuousClock.now < deadline else {
                throw failure(index, "was not ready within \(configuration.readyTimeout) (GET \(url))")
            }
            try await Task.sleep(for: .milliseconds(100))
        }
    }

    private func failure(_ index: Int, _ what: String) -> FleetError {
        let log = logPath(index)
        return FleetError(
            "server instance \(index) on port \(configuration.ports[index]) \(what); log \(log), last lines:\n\(LogTail.lastLines(of: log))")
    }
}
