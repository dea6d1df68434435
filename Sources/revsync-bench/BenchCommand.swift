import ArgumentParser
import Foundation
import Logging

@main
struct BenchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "revsync-bench",
        abstract: """
            Catch-up latency (Redis path, PostgreSQL only, raw floor), many catch-up clients at once (wrk), \
            and write throughput against its SQL-only floor, side by side in one run; or, with --push, \
            live push by long-poll against release `revsync serve` processes; or, with --snapshot, the JSON \
            snapshot against the SQLite snapshot file (server build, sizes, a new device's bootstrap).
            """,
        subcommands: [BootstrapDeviceCommand.self])

    @Option(help: "Revisions in the log.") var revisions = 100_000
    @Option(help: "Approximate bytes of each change set.") var entryBytes = 1_000
    @Option(help: "Seconds of writing per concurrency level, and per batch size of the floor.") var writeSeconds = 10
    @Option(help: "Seconds of each wrk run of the concurrent catch-up part (d); 0 skips it.") var loadSeconds = 5
    @Flag(help: "Skip the catch-up parts (no log is loaded): only the writes and their floor.") var writesOnly = false
    @Flag(help: "Skip the writes and their floor: only the catch-up parts.") var catchUpOnly = false
    @Flag(help: "Measure only live push by long-poll: many devices waiting on release `revsync serve` processes.") var push = false
    @Option(help: "With --push: devices waiting at once on one instance.") var pushWaiters = 10_000
    @Option(help: "With --push: devices waiting in the write-to-visible parts.") var pushVisibleWaiters = 100
    @Option(help: "With --push: commits with every one of --push-waiters waiting, each after all wait again.") var pushFanOuts = 5
    @Option(help: "With --push: measured commits of each write-to-visible part.") var pushCommits = 200
    @Option(help: "With --push: seconds of each reading of the server's idle CPU.") var pushIdleSeconds = 10
    @Flag(help: "Measure only GET /snapshot: the JSON snapshot against the SQLite snapshot file, on release `revsync serve` processes.")
    var snapshot = false
    @Option(parsing: .upToNextOption, help: "With --snapshot: the dataset sizes, in records, each on a fresh database and server.")
    var snapshotSizes = [100_000, 1_000_000]
    @Option(help: "With --snapshot: seconds any one step may take (the build, an answer, a device's bootstrap).") var snapshotStepSeconds = 600
    @Option(help: "With --snapshot: clients that stop reading each kind of snapshot after its first bytes, at the first size (0 skips them).")
    var snapshotSlowReaders = 50
    @Option(help: "With --push or --snapshot: the `revsync` executable to run (default: the one beside revsync-bench).") var server: String?
    @Option(help: "Where to write the JSON report.") var output = "reports/bench.json"
    @Option(help: "PostgreSQL server URL (a database named revsync_bench is created there).")
    var databaseURL = ProcessInfo.processInfo.environment["REVSYNC_DATABASE_URL"] ?? "postgres://revsync@127.0.0.1:54329/revsync"
    @Option(help: "Redis URL (the bench flushes it: use the throwaway stack's).")
    var redisURL = ProcessInfo.processInfo.environment["REVSYNC_REDIS_URL"] ?? "redis://127.0.0.1:63799"

    func validate() throws {
        guard !(writesOnly && catchUpOnly) else { throw ValidationError("--writes-only and --catch-up-only leave nothing to measure") }
        guard loadSeconds >= 0 else { throw ValidationError("--load-seconds must be 0 or more") }
        guard !(push && (writesOnly || catchUpOnly)) else { throw ValidationError("--push measures push only: leave out --writes-only and --catch-up-only") }
        guard pushWaiters >= pushVisibleWaiters, pushVisibleWaiters >= 1 else {
            throw ValidationError("--push-visible-waiters must be 1 or more, and --push-waiters at least as many")
        }
        guard pushCommits >= 1, pushIdleSeconds >= 1, pushFanOuts >= 1 else {
            throw ValidationError("--push-commits, --push-fan-outs and --push-idle-seconds must be 1 or more")
        }
        guard !(snapshot && (push || writesOnly || catchUpOnly)) else {
            throw ValidationError("--snapshot measures the snapshot only: leave out --push, --writes-only and --catch-up-only")
        }
        guard !snapshotSizes.isEmpty, snapshotSizes.allSatisfy({ $0 >= 100 }) else { throw ValidationError("--snapshot-sizes must each be 100 or more") }
        guard snapshotStepSeconds >= 1 else { throw ValidationError("--snapshot-step-seconds must be 1 or more") }
        guard (0...1000).contains(snapshotSlowReaders) else { throw ValidationError("--snapshot-slow-readers must be 0 to 1000") }
    }

    func run() async throws {
        var logger = Logger(label: "revsync.bench")
        logger.logLevel = .warning
        if push {
            let options = PushBench.Options(
                waiters: pushWaiters, visibleWaiters: pushVisibleWaiters, fanOuts: pushFanOuts, commits: pushCommits, idleSeconds: pushIdleSeconds,
                server: server ?? Self.sibling("revsync"))
            let report = try await PushBench(databaseURL: databaseURL, redisURL: redisURL, options: options, logger: logger).run()
            print(report.table())
            try report.write(to: output)
            print("JSON report: \(output)")
            return
        }
        if snapshot {
            let options = SnapshotBench.Options(
                sizes: snapshotSizes, slowReaders: snapshotSlowReaders, server: server ?? Self.sibling("revsync"),
                stepTimeout: .seconds(snapshotStepSeconds))
            let report = try await SnapshotBench(serverURL: databaseURL, options: options, logger: logger).run()
            print(report.table())
            try report.write(to: output)
            print("JSON report: \(output)")
            return
        }
        let parts: Bench.Parts = writesOnly ? .writes : (catchUpOnly ? .catchUp : .all)
        let bench = try await Bench(
            databaseURL: databaseURL, redisURL: redisURL, revisions: Int64(revisions), entryBytes: entryBytes, logger: logger)
        let report = try await bench.run(parts: parts, writeSeconds: writeSeconds, loadSeconds: loadSeconds)
        print(report.table())
        try report.write(to: output)
        print("JSON report: \(output)")
    }

    /// `name` in the directory of this executable: `swift build` puts its products side by side.
    private static func sibling(_ name: String) -> String {
        let executable = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe"))
            ?? Bundle.main.executablePath ?? CommandLine.arguments[0]
        return URL(fileURLWithPath: executable).deletingLastPathComponent().appendingPathComponent(name).path
    }
}
