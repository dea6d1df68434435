import Foundation
import RevsyncTestSupport
import Testing
@testable import RevsyncSim

/// The CI soak: 50 devices for 60 s on the terrible link against a real server
/// process (debug build), one server kill -9, one Redis FLUSHALL, the snapshot files
/// removed under the server, one device restored from an older copy of its file, one
/// device revoked (with the server cut from Redis silently around it), one member
/// downgraded to viewer, one device's token rotated and the database restored from a
/// backup under the running server, then the full verdict. It takes about two minutes of two cores, so it runs alone:
/// `Scripts/test` runs it after the other tests with REVSYNC_CI_SOAK=1.
@Suite(.enabled(if: ProcessInfo.processInfo.environment["REVSYNC_CI_SOAK"] == "1", "set REVSYNC_CI_SOAK=1 (Scripts/test does)"))
struct CISoakTests {
    @Test(.timeLimit(.minutes(15)))
    func fiftyDevicesOnTheTerribleLinkThroughServerAndDeviceFaultsConverge() async throws {
        guard let server = ServerFleetConfiguration.executableNextToThisProgram(named: "revsync") else {
            Issue.record("no revsync executable next to the test runner: run `swift build --build-tests` first")
            return
        }
        // A Redis of its own: the flush must not disturb anything else.
        let redis = try await ThrowawayRedisServer.start()
        let name = "revsync_soak_ci_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").prefix(12).lowercased()
        let runDirectory = FileManager.default.temporaryDirectory.appendingPathComponent(name).path
        // REVSYNC_CI_SOAK_SEED replays a run's plan (the links' timing still varies).
        let seed = ProcessInfo.processInfo.environment["REVSYNC_CI_SOAK_SEED"].flatMap { UInt64($0) } ?? UInt64.random(in: 1...UInt64(Int64.max))
        var settings = SoakSettings(
            seed: seed, runDirectory: runDirectory, serverExecutable: server, databaseURL: TestDatabase.serverURL,
            redisURL: "redis://127.0.0.1:\(redis.port)", schemaPath: defaultSchemaPath,
            restartRedisCommand: ["false"], restartPostgresCommand: ["false"])
        settings.databaseName = name
        settings.devices = 50
        settings.workload = .seconds(60)
        settings.link = "terrible"
        settings.seedRecords = 5_000
        settings.faults = [
            .serverKill, .redisFlush, .snapshotRemoved, .deviceRestore, .deviceRevoke, .deviceRoleDowngrade, .deviceRotate, .databaseRestore,
            .redisPartition, .postgresPathDies,
        ]
        settings.drainBound = .seconds(240)
        settings.showProgress = true
        settings.replayCommand = "REVSYNC_CI_SOAK=1 swift test --filter CISoakTests (seed \(seed))"
        print("CI soak: seed \(seed), run directory \(runDirectory)")

        let report = try await SoakRun(settings: settings).run()

        // A failed run's database stays, next to its report, for the search of what went wrong.
        var url = URLComponents(string: TestDatabase.serverURL)
        url?.path = "/" + name
        if report.verdict.passed, let url = url?.string { await TestDatabase.drop(url) }
        for check in report.verdict.checks {
            #expect(check.passed, "\(check.name): \(check.detail) (seed \(seed), report in \(runDirectory))")
        }
        // The run must really have exercised what it claims to.
        #expect(report.faults["server_kill"] == 1)
        #expect(report.faults["redis_flush"] == 1)
        #expect(report.faults["snapshot_removed"] == 1)
        #expect(report.verdict.checks.contains { $0.name == VerdictChecks.Name.snapshotDirectory })
        #expect(report.faults["device_crash", default: 0] > 0)
        #expect(report.faults["device_join", default: 0] > 0)
        #expect(report.faults["device_restore"] == 1)
        #expect(report.faults["device_revoke"] == 1)
        #expect(report.faults["device_role_downgrade"] == 1)
        #expect(report.faults["device_rotate"] == 1)
        #expect(report.faults["database_restore"] == 1)
        #expect(report.faults["redis_partition", default: 0] >= 1)
        #expect(report.events.contains { $0.kind == "redis_healed" }, "the partition from Redis never healed")
        #expect(report.verdict.checks.contains { $0.name == VerdictChecks.Name.redisPartitions })
        #expect(report.faults["postgres_path_dies"] == 1)
        #expect(report.events.contains { $0.kind == "postgres_path_given_up" }, "no instance's silent PostgreSQL connections were watched to the end")
        #expect(report.verdict.checks.contains { $0.name == VerdictChecks.Name.silentPostgresPaths })
        #expect(report.events.contains { $0.kind == "device_token_renewed" }, "the rotated device was never given its new token")
        #expect(report.events.contains { $0.kind == "device_restored" }, "the restore never finished")
        #expect(report.convergence.revokedDevices == 1)
        #expect(report.changeSets.acknowledged > 100, "the workload barely ran")
        #expect(report.changeSets.rejectedByReason.values.reduce(0, +) > 0, "no conflict happened")
        #expect(report.convergence.convergedDevices == report.convergence.devices)
        if report.verdict.passed { try? FileManager.default.removeItem(atPath: runDirectory) }
    }
}
