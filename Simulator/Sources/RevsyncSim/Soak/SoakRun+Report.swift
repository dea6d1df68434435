import Foundation
import RevsyncLink

extension SoakRun {
    /// Adds up the devices, the links and the run's own records into the report, and writes it.
    func makeReport(
        checks: [VerdictCheck], serverLatency: LatencyPercentiles?, started: ContinuousClock.Instant, startedAt: String
    ) async throws -> SoakReport {
        var tally = DeviceTally()
        var faults = faultCounts
        for device in devices {
            tally = tally + (await device.tally)
            let link = device.link.stats()
            for (fate, count) in link.fates where fate != .pass {
                faults[Self.faultName(fate), default: 0] += count
            }
        }
        var checks = checks
        checks.append(VerdictCheck(
            name: "faults injected", passed: injectionFailures.isEmpty,
            detail: injectionFailures.isEmpty
                ? "\(events.filter { FaultKind(rawValue: $0.kind) != nil }.count) planned faults injected"
                : injectionFailures.joined(separator: "; ")))
        var operations = tally.operations
        operations.bootstraps = max(operations.bootstraps, devices.count)
        var report = SoakReport(
            seed: settings.seed,
            settings: SoakSettingsSummary(
                devices: settings.devices, joiningDevices: settings.joining, workloadSeconds: settings.workload.inSeconds,
                link: settings.linkKnobs.isEmpty ? settings.link : settings.link + " with changes", instances: settings.instances, seededRecords: seedIndex.records,
                serverFaults: FaultKind.serverSide.filter(settings.effectiveFaults.contains).map(\.rawValue),
                deviceFaults: FaultKind.deviceSide.filter(settings.effectiveFaults.contains).map(\.rawValue),
                longPollWaitSeconds: settings.longPollWait.inSeconds, replay: settings.replayCommand),
            startedAt: startedAt, totalSeconds: (clock.now - started).inSeconds, verdict: VerdictSummary(checks: checks),
            operations: operations, changeSets: tally.changeSets, faults: faults, bytes: stats.bytes,
            catchUpLatency: CatchUpLatency(devices: stats.catchUpLatency, server: serverLatency, whileCutFromRedis: stats.catchUpWhileCutLatency),
            writeToVisible: visibility.summary,
            convergence: ConvergenceSummary(
                secondsToConverge: secondsToConverge, convergedDevices: convergedDevices, devices: devices.count - revokedDevices.count,
                boundSeconds: settings.drainBound.inSeconds, revokedDevices: revokedDevices.count),
            timeline: timeline, events: events)
        report.snapshots = stats.snapshots
        let paths = try ReportWriter.write(report, to: settings.runDirectory, name: settings.reportName)
        say(ReportTable.render(report))
        say("report: \(paths.json)\n        \(paths.html)")
        return report
    }

    static func faultName(_ fate: RequestFate) -> String {
        switch fate {
        case .pass: "pass"
        case .refuse: "refuse"
        case .resetMidRequest: "reset_mid_request"
        case .resetMidResponse: "reset_mid_response"
        case .stall: "stall"
        case .dropAfterCommit: "drop_after_commit"
        case .duplicate: "duplicate"
        case .split: "split"
        }
    }
}
