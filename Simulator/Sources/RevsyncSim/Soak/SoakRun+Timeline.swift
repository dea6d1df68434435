import Foundation
import PostgresNIO

extension SoakRun {
    /// Samples the run once a second for the timeline and the live progress line, until cancelled.
    func sampleEverySecond(client: PostgresClient) async {
        let logger = self.logger
        // The head is polled apart: a restarting PostgreSQL must not stall the samples.
        let headPoller = Task {
            while !Task.isCancelled {
                if let head = await SoakDatabase.head(client, logger: logger) { self.observeHead(head) }
                try? await Task.sleep(for: .seconds(1))
            }
        }
        while !Task.isCancelled {
            try? await Task.sleep(for: .seconds(1))
            await sample()
        }
        headPoller.cancel()
        endProgressLine()
    }

    func observeHead(_ value: Int64) {
        head = max(head, value)
    }

    private func sample() async {
        var online = 0
        var offline = 0
        var pending = 0
        var tally = DeviceTally()
        for (index, device) in devices.enumerated() {
            let isOffline = device.link.isOffline
            if isOffline, !(offlineNow[index] ?? false) { faultCounts["offline_window", default: 0] += 1 }
            offlineNow[index] = isOffline
            if isOffline { offline += 1 } else { online += 1 }
            pending += await device.pending
            tally = tally + (await device.tally)
        }
        let conflicts = tally.changeSets.rejectedByReason.values.reduce(0, +)
        let errors = tally.changeSets.failedRounds + tally.changeSets.retries
        let t = workloadStart.map { (clock.now - $0).inSeconds } ?? 0
        let latency = stats.takeInterval()
        timeline.append(TimelineSample(
            t: t, online: online, offline: offline, pending: pending, headRevision: head, conflicts: conflicts, errors: errors,
            latencyP50: latency?.p50, latencyP99: latency?.p99))
        progressLine(ProgressSnapshot(
            elapsedSeconds: t, phase: phase, online: online, offline: offline, pending: pending, headRevision: head,
            conflicts: conflicts, errors: errors, acknowledged: tally.changeSets.acknowledged))
    }

    /// Rewrites the progress line in place on a terminal; elsewhere (CI logs) prints one every ten seconds.
    func progressLine(_ snapshot: ProgressSnapshot) {
        progressText(ProgressLine.format(snapshot))
    }

    func progressText(_ line: String) {
        guard settings.showProgress else { return }
        if isatty(STDERR_FILENO) != 0 {
            FileHandle.standardError.write(Data(("\r\u{1B}[K" + line).utf8))
            progressShown = true
        } else if clock.now - lastProgressPrint >= .seconds(10) {
            lastProgressPrint = clock.now
            say(line)
        }
    }

    func endProgressLine() {
        guard progressShown else { return }
        progressShown = false
        FileHandle.standardError.write(Data("\n".utf8))
    }
}
