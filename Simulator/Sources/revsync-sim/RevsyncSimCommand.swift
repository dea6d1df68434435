import ArgumentParser
import Foundation
import RevsyncSim

@main
struct RevsyncSimCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "revsync-sim",
        abstract: "Soak test: N virtual devices on faulty links against Revsync servers, then a convergence verdict.",
        discussion: """
            Creates a fresh database (--database-name) next to --database-url, starts --instances servers, seeds \
            the dataset, bootstraps the devices from /snapshot, runs the workload with link and server faults, heals, \
            drains, compares every device with PostgreSQL and writes a JSON and an HTML report to --run-dir. \
            Exit status: 0 when every check holds, 1 on a violation, 2 when the run could not be carried out.
            """)

    @Option(help: "Virtual devices at the start.")
    var devices = 50

    @Option(help: "Devices joining during the run (default: a tenth of --devices).")
    var joining: Int?

    @Option(help: "Length of the workload in minutes (fractions allowed).")
    var minutes = 2.0

    @Option(help: "Link preset of every device: good, wifi or terrible.")
    var link = "terrible"

    @Option(help: "Link latency each way in ms, over the preset's.")
    var latency: Double?

    @Option(help: "Extra random latency each way, up to this many ms.")
    var jitter: Double?

    @Option(help: "Link bandwidth cap in bytes per second each way (0: none).")
    var bandwidth: Int?

    @Option(help: "Odds per request of a refused connection (0…1).")
    var refuse: Double?

    @Option(help: "Odds per request of a reset in the middle of the request.")
    var resetMidRequest: Double?

    @Option(help: "Odds per request of a reset in the middle of the response.")
    var resetMidResponse: Double?

    @Option(help: "Odds per request of a stall: the device hears nothing for the preset's stall (10 s wifi, 15 s terrible), then the connection closes.")
    var stall: Double?

    @Option(help: "Odds per request of the response dropped after the server committed.")
    var dropAfterCommit: Double?

    @Option(help: "Odds per request of the request reaching the server twice.")
    var duplicate: Double?

    @Option(help: "Odds per request of the request reaching another server instance at the same time (with --instances 2 or more).")
    var split: Double?

    @Option(help: "Offline windows: never, or ONLINE/OFFLINE ranges in seconds, e.g. 20-180/5-120.")
    var offline: String?

    @Option(help: "Server instances over the same PostgreSQL and Redis; devices are spread across them.")
    var instances = 1

    @Option(help: "Seed of every random choice (default: random). The run prints it; pass it again to replay.")
    var seed: UInt64?

    @Option(help: "Records seeded before the devices bootstrap.")
    var records = 100_000

    @Option(help: """
        Faults, comma-separated: server-kill, redis-flush, redis-restart, postgres-restart, postgres-refuses, snapshot-removed, schema-upgrade, \
        database-restore, redis-partition, postgres-path-dies, postgres-freezes (server side; the last two need root, \
        postgres-path-dies nft too), \
        device-restore, device-revoke, device-role-downgrade, device-rotate (device side), all or none.
        """)
    var faults = "server-kill,redis-flush"

    @Option(help: "Devices killed mid-sync and restarted from their file (default: a fifth of --devices).")
    var crashes: Int?

    @Option(help: "Mean seconds between two actions of one user.")
    var thinkTime = 4.0

    @Option(help: "Seconds a device lets the server hold its catch-up (long-poll) when it has nothing to send; 0: poll every 5 s.")
    var wait = 25.0

    @Option(help: "Shared records every device keeps editing (the source of conflicts).")
    var hotSet = 40

    @Option(help: "Seconds every device has after healing to converge; a device still pending then fails the run.")
    var drainBound = 300.0

    @Option(help: "Devices bootstrapping at once before the run.")
    var bootstrapConcurrency = 4

    @Option(help: "Where the device files, server logs and reports go (default: reports/soak-<seed>).")
    var runDir: String?

    @Option(help: "The revsync server executable (default: the one next to this program).")
    var server: String?

    @Option(help: "PostgreSQL URL (env REVSYNC_DATABASE_URL); the soak's database is created next to it.")
    var databaseURL: String?

    @Option(help: "Name of the soak's database, dropped and created at the start.")
    var databaseName = "revsync_soak"

    @Option(help: "Redis URL, or off (env REVSYNC_REDIS_URL).")
    var redisURL: String?

    @Option(help: "Dataset schema file (env REVSYNC_SCHEMA, default Config/schema.json).")
    var schema: String?

    @Option(help: "The repository whose Scripts/stack restarts Redis and PostgreSQL (default: the current directory).")
    var repo: String?

    @Flag(help: "No live progress line.")
    var quiet = false

    func run() async throws {
        let environment = ProcessInfo.processInfo.environment
        let seed = self.seed ?? UInt64.random(in: 1...UInt64(Int64.max))
        guard let databaseURL = databaseURL ?? environment["REVSYNC_DATABASE_URL"] else {
            throw ValidationError("give --database-url or REVSYNC_DATABASE_URL (Scripts/soak sets it for the project's stack)")
        }
        guard let server = server ?? ServerFleetConfiguration.executableNextToThisProgram(named: "revsync") else {
            throw ValidationError("no revsync executable next to revsync-sim: build it (swift build) or give --server")
        }
        let repo = self.repo ?? FileManager.default.currentDirectoryPath
        let redis = redisURL ?? environment["REVSYNC_REDIS_URL"] ?? "redis://127.0.0.1:63799"
        let stack = repo + "/Scripts/stack"

        var settings = SoakSettings(
            seed: seed, runDirectory: runDir ?? "\(repo)/reports/soak-\(seed)", serverExecutable: server,
            databaseURL: databaseURL, redisURL: redis == "off" ? nil : redis,
            schemaPath: schema ?? environment["REVSYNC_SCHEMA"] ?? "\(repo)/Config/schema.json",
            restartRedisCommand: [stack, "restart", "redis"], restartPostgresCommand: [stack, "restart", "postgres"])
        settings.devices = try positive(devices, "--devices")
        settings.joiningDevices = try joining.map { try nonNegative($0, "--joining") }
        settings.workload = .seconds(try positive(minutes, "--minutes") * 60)
        settings.link = link
        settings.linkKnobs = try linkKnobs()
        settings.instances = try positive(instances, "--instances")
        settings.seedRecords = try positive(records, "--records")
        settings.faults = try Self.parseFaults(faults)
        settings.deviceCrashes = try crashes.map { try nonNegative($0, "--crashes") }
        settings.thinkTime = .seconds(try positive(thinkTime, "--think-time"))
        guard wait.isFinite, wait >= 0 else { throw ValidationError("--wait is 0 or more seconds, not \(wait)") }
        settings.longPollWait = .seconds(wait)
        settings.hotSetSize = try positive(hotSet, "--hot-set")
        settings.drainBound = .seconds(try positive(drainBound, "--drain-bound"))
        settings.bootstrapConcurrency = try positive(bootstrapConcurrency, "--bootstrap-concurrency")
        settings.databaseName = databaseName
        settings.showProgress = !quiet
        settings.replayCommand = replayCommand(seed: seed)

        let report: SoakReport
        do {
            report = try await SoakRun(settings: settings).run()
        } catch {
            FileHandle.standardError.write(Data("revsync-sim: the run could not be carried out: \(error)\nseed \(seed)\n".utf8))
            throw ExitCode(2)
        }
        FileHandle.standardError.write(Data("seed \(seed) — replay: \(settings.replayCommand)\n".utf8))
        if !report.verdict.passed { throw ExitCode(1) }
    }

    private func linkKnobs() throws -> LinkKnobs {
        var knobs = LinkKnobs()
        knobs.latency = try latency.map { try milliseconds($0, "--latency") }
        knobs.jitter = try jitter.map { try milliseconds($0, "--jitter") }
        knobs.bandwidth = try bandwidth.map { try nonNegative($0, "--bandwidth") }
        for (value, name) in [
            (refuse, "--refuse"), (resetMidRequest, "--reset-mid-request"), (resetMidResponse, "--reset-mid-response"),
            (stall, "--stall"), (dropAfterCommit, "--drop-after-commit"), (duplicate, "--duplicate"),
            (split, "--split"),
        ] {
            if let value, !(0...1).contains(value) { throw ValidationError("\(name) is a probability from 0 to 1, not \(value)") }
        }
        knobs.refuse = refuse
        knobs.resetMidRequest = resetMidRequest
        knobs.resetMidResponse = resetMidResponse
        knobs.stall = stall
        knobs.dropAfterCommit = dropAfterCommit
        knobs.duplicate = duplicate
        knobs.split = split
        if let offline { knobs.offline = .some(try LinkKnobs.parseOffline(offline)) }
        return knobs
    }

    static func parseFaults(_ text: String) throws -> Set<FaultKind> {
        do {
            return try FaultSelection.parse(text)
        } catch let error as SoakError {
            throw ValidationError(error.description)
        }
    }

    private func positive<T: Numeric & Comparable>(_ value: T, _ name: String) throws -> T {
        guard value > 0 else { throw ValidationError("\(name) must be positive, not \(value)") }
        return value
    }

    private func nonNegative<T: Numeric & Comparable>(_ value: T, _ name: String) throws -> T {
        guard value >= 0 else { throw ValidationError("\(name) must be 0 or more, not \(value)") }
        return value
    }

    /// A link delay: `nonNegative`, and at most an hour (a `Duration` cannot hold infinity, and
    /// traps on a number of milliseconds too large for it).
    private func milliseconds(_ value: Double, _ name: String) throws -> Duration {
        guard value.isFinite, value <= 3_600_000 else { throw ValidationError("\(name) must be at most 3600000 milliseconds (an hour), not \(value)") }
        return .milliseconds(try nonNegative(value, name))
    }

    /// This command line with the seed pinned.
    private func replayCommand(seed: UInt64) -> String {
        var arguments = Array(CommandLine.arguments.dropFirst())
        if let index = arguments.firstIndex(of: "--seed"), index + 1 < arguments.count {
            arguments.removeSubrange(index...index + 1)
        }
        arguments.removeAll { $0.hasPrefix("--seed=") }
        return (["revsync-sim"] + arguments + ["--seed", String(seed)]).joined(separator: " ")
    }
}
