import ArgumentParser
import Foundation
import Logging

@main
struct BenchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "revsync-bench",
        abstract: """
            Catch-up latency (Redis path, PostgreSQL only, raw floor), many catch-up clients at once (wrk), \
            and write throughput against its SQL-only floor, side by side in one run.
            """)

    @Option(help: "Revisions in the log.") var revisions = 100_000
    @Option(help: "Approximate bytes of each change set.") var entryBytes = 1_000
    @Option(help: "Seconds of writing per concurrency level, and per batch size of the floor.") var writeSeconds = 10
    @Option(help: "Seconds of each wrk run of the concurrent catch-up part (d); 0 skips it.") var loadSeconds = 5
    @Flag(help: "Skip the catch-up parts (no log is loaded): only the writes and their floor.") var writesOnly = false
    @Flag(help: "Skip the writes and their floor: only the catch-up parts.") var catchUpOnly = false
    @Option(help: "Where to write the JSON report.") var output = "reports/bench.json"
    @Option(help: "PostgreSQL server URL (a database named revsync_bench is created there).")
    var databaseURL = ProcessInfo.processInfo.environment["REVSYNC_DATABASE_URL"] ?? "postgres://revsync@127.0.0.1:54329/revsync"
    @Option(help: "Redis URL (the bench flushes it: use the throwaway stack's).")
    var redisURL = ProcessInfo.processInfo.environment["REVSYNC_REDIS_URL"] ?? "redis://127.0.0.1:63799"

    func validate() throws {
        guard !(writesOnly && catchUpOnly) else { throw ValidationError("--writes-only and --catch-up-only leave nothing to measure") }
        guard loadSeconds >= 0 else { throw ValidationError("--load-seconds must be 0 or more") }
    }

    func run() async throws {
        var logger = Logger(label: "revsync.bench")
        logger.logLevel = .warning
        let parts: Bench.Parts = writesOnly ? .writes : (catchUpOnly ? .catchUp : .all)
        let bench = try await Bench(
            databaseURL: databaseURL, redisURL: redisURL, revisions: Int64(revisions), entryBytes: entryBytes, logger: logger)
        let report = try await bench.run(parts: parts, writeSeconds: writeSeconds, loadSeconds: loadSeconds)
        print(report.table())
        try report.write(to: output)
        print("JSON report: \(output)")
    }
}
