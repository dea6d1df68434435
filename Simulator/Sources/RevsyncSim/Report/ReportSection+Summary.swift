extension ReportSection {
    /// Every figure of the report except the verdict and the timeline, in reading order.
    static func summary(_ report: SoakReport) -> [ReportSection] {
        [
            run(report), settings(report.settings), operations(report.operations), changeSets(report.changeSets),
            byKind("Rejected by reason", key: "reason", report.changeSets.rejectedByReason),
            byKind("Faults injected", key: "kind", report.faults),
            bytes(report.bytes),
        ] + (report.snapshots.map { [snapshots($0)] } ?? []) + [
            latency(report.catchUpLatency),
        ] + (report.writeToVisible.map { [writeToVisible($0)] } ?? []) + [convergence(report.convergence)]
    }

    static func run(_ report: SoakReport) -> ReportSection {
        ReportSection(title: "Run", rows: [
            ["seed", String(report.seed)],
            ["replay", report.settings.replay],
            ["started", report.startedAt],
            ["total", ReportFormat.seconds(report.totalSeconds)],
        ])
    }

    static func settings(_ s: SoakSettingsSummary) -> ReportSection {
        ReportSection(title: "Settings", rows: [
            ["devices", ReportFormat.count(s.devices)],
            ["joining devices", ReportFormat.count(s.joiningDevices)],
            ["workload", ReportFormat.seconds(s.workloadSeconds)],
            ["link", s.link],
            ["server instances", ReportFormat.count(s.instances)],
            ["seeded records", ReportFormat.count(s.seededRecords)],
            ["server faults", s.serverFaults.isEmpty ? "none" : s.serverFaults.joined(separator: ", ")],
            ["device faults", s.deviceFaults.isEmpty ? "none" : s.deviceFaults.joined(separator: ", ")],
        ] + (s.longPollWaitSeconds.map { [["long-poll wait", $0 > 0 ? ReportFormat.seconds($0) : "off (polling)"]] } ?? []))
    }

    static func operations(_ o: OperationCounts) -> ReportSection {
        ReportSection(title: "Operations", rows: [
            ["transactions", ReportFormat.count(o.transactions)],
            ["creates", ReportFormat.count(o.creates)],
            ["updates", ReportFormat.count(o.updates)],
            ["deletes", ReportFormat.count(o.deletes)],
            ["offline transactions", ReportFormat.count(o.offlineTransactions)],
            ["refused locally", ReportFormat.count(o.refusedLocally)],
            ["sync rounds", ReportFormat.count(o.syncRounds)],
            ["long-polls answered", ReportFormat.count(o.longPolls)],
            ["long-polls with changes", ReportFormat.count(o.longPollsWithChanges)],
            ["bootstraps", ReportFormat.count(o.bootstraps)],
        ], numeric: true)
    }

    static func changeSets(_ c: ChangeSetCounts) -> ReportSection {
        let rejected = c.rejectedByReason.values.reduce(0, +)
        return ReportSection(title: "Change sets", rows: [
            ["sent", ReportFormat.count(c.sent)],
            ["acknowledged", ReportFormat.count(c.acknowledged)],
            ["rejected", ReportFormat.count(rejected)],
            ["received", ReportFormat.count(c.received)],
            ["retries", ReportFormat.count(c.retries)],
            ["failed rounds", ReportFormat.count(c.failedRounds)],
        ], numeric: true)
    }

    /// Largest count first so the dominant reason or fault leads; ties by name for stable output.
    static func byKind(_ title: String, key: String, _ counts: [String: Int]) -> ReportSection {
        let sorted = counts.sorted { $0.value != $1.value ? $0.value > $1.value : $0.key < $1.key }
        let rows = sorted.isEmpty ? [["none", "0"]] : sorted.map { [$0.key, ReportFormat.count($0.value)] }
        return ReportSection(title: title, header: [key, "count"], rows: rows, numeric: true)
    }

    static func bytes(_ b: ByteCounts) -> ReportSection {
        func row(_ label: String, _ raw: Int, _ wire: Int) -> [String] {
            [label, ReportFormat.bytes(raw), ReportFormat.bytes(wire), ReportFormat.ratio(raw: raw, wire: wire)]
        }
        let raw = b.requestRaw + b.responseRaw
        let wire = b.requestWire + b.responseWire
        return ReportSection(title: "Bytes", header: ["", "raw", "wire", "gzip ratio"], rows: [
            row("requests", b.requestRaw, b.requestWire),
            row("responses", b.responseRaw, b.responseWire),
            row("total", raw, wire),
        ], numeric: true)
    }

    static func snapshots(_ s: SnapshotDownloads) -> ReportSection {
        ReportSection(title: "Snapshot downloads", header: ["", "count"], rows: [
            ["SQLite files, whole", ReportFormat.count(s.files)],
            ["SQLite files, resumed after a cut (206)", ReportFormat.count(s.resumed)],
            ["SQLite files, cut mid-way", ReportFormat.count(s.cut)],
            ["JSON snapshots", ReportFormat.count(s.json)],
            ["refused or failed", ReportFormat.count(s.failed)],
        ], numeric: true)
    }

    static func latency(_ l: CatchUpLatency) -> ReportSection {
        func row(_ label: String, _ p: LatencyPercentiles?) -> [String] {
            guard let p else { return [label, "n/a", "n/a", "n/a", "n/a", "n/a"] }
            return [label, ReportFormat.count(p.count)] + [p.p50, p.p90, p.p99, p.max].map(ReportFormat.milliseconds)
        }
        return ReportSection(title: "Catch-up latency", header: ["", "samples", "p50", "p90", "p99", "max"], rows: [
            row("devices", l.devices),
            row("server", l.server),
        ] + (l.whileCutFromRedis.map { [row("devices, instance cut from Redis", $0)] } ?? []), numeric: true)
    }

    /// Label/value rows: the percentiles, then what was and was not counted, and who counts.
    static func writeToVisible(_ w: WriteToVisibleLatency) -> ReportSection {
        let p = w.latency
        let measured = p.count > 0
        func ms(_ value: Double) -> String { measured ? ReportFormat.milliseconds(value) : "n/a" }
        return ReportSection(title: "Write-to-visible latency", rows: [
            ["samples", ReportFormat.count(p.count)],
            ["p50", ms(p.p50)],
            ["p90", ms(p.p90)],
            ["p99", ms(p.p99)],
            ["max", ms(p.max)],
            ["change sets measured", ReportFormat.count(w.acknowledgements)],
            ["seen before the ack (0 ms)", ReportFormat.count(w.seenBeforeAcknowledgement)],
            ["dropped (went offline first)", ReportFormat.count(w.dropped)],
            ["never seen", ReportFormat.count(w.unresolved)],
            ["counts", "every other device online at the ack (bootstrapped, link up, not restarting, not revoked) until it applied the revision"],
        ])
    }

    static func convergence(_ c: ConvergenceSummary) -> ReportSection {
        let time = c.secondsToConverge.map(ReportFormat.seconds) ?? "did not converge"
        var rows = [
            ["time to converge", time],
            ["converged devices", "\(ReportFormat.count(c.convergedDevices))/\(ReportFormat.count(c.devices))"],
        ]
        if c.revokedDevices > 0 { rows.append(["revoked (not compared)", ReportFormat.count(c.revokedDevices)]) }
        rows.append(["bound", ReportFormat.seconds(c.boundSeconds)])
        return ReportSection(title: "Convergence", rows: rows)
    }
}
