import Foundation
import Testing
@testable import RevsyncSim

@Suite struct ReportRenderingTests {
    static func sample(checks: [VerdictCheck]? = nil, timeline: [TimelineSample]? = nil, events: [TimelineEvent]? = nil)
        -> SoakReport
    {
        var operations = OperationCounts()
        operations.transactions = 12_345
        operations.creates = 4_000
        var changeSets = ChangeSetCounts()
        changeSets.sent = 13_000
        changeSets.acknowledged = 12_000
        changeSets.rejectedByReason = ["stale_revision": 31, "deleted": 4]
        changeSets.retries = 77
        var bytes = ByteCounts()
        bytes.requestRaw = 5_000_000
        bytes.requestWire = 1_250_000
        bytes.responseRaw = 80_000_000
        bytes.responseWire = 10_000_000
        let samples = timeline ?? Self.sixSeconds()
        return SoakReport(
            seed: 8_675_309,
            settings: SoakSettingsSummary(
                devices: 50, joiningDevices: 5, workloadSeconds: 300, link: "wan-flaky", instances: 2, seededRecords: 10_000,
                serverFaults: ["server_kill"], replay: "revsync-sim soak --seed 8675309 --server http://127.0.0.1:8080"
            ),
            startedAt: "2025-01-01T00:00:00Z", totalSeconds: 412.3,
            verdict: VerdictSummary(checks: checks ?? [
                VerdictCheck(name: "devices equal PostgreSQL", passed: true, detail: "50 devices equal to PostgreSQL"),
                VerdictCheck(name: "no lost writes", passed: true, detail: "lost 0"),
            ]),
            operations: operations, changeSets: changeSets,
            faults: ["server_kill": 2, "offline_window": 40, "reset_mid_request": 120], bytes: bytes,
            catchUpLatency: CatchUpLatency(
                devices: LatencyPercentiles(count: 9_000, p50: 12.34, p90: 45.6, p99: 120.04, max: 912.7), server: nil
            ),
            convergence: ConvergenceSummary(secondsToConverge: 8.5, convergedDevices: 50, devices: 50, boundSeconds: 120),
            timeline: samples,
            events: events ?? [
                TimelineEvent(t: 0, kind: "workload", detail: ""),
                TimelineEvent(t: 2, kind: "server_kill", detail: "instance 1"),
                TimelineEvent(t: 5, kind: "heal", detail: ""),
            ]
        )
    }

    /// Six one-second samples; second 3 has no latency sample.
    static func sixSeconds() -> [TimelineSample] {
        (0..<6).map { (second: Int) -> TimelineSample in
            let latency: Double? = second == 3 ? nil : Double(second)
            return TimelineSample(
                t: Double(second), online: 47, offline: 3, pending: 12 - second, headRevision: Int64(100 * second),
                conflicts: second, errors: second / 2,
                latencyP50: latency.map { 10 + $0 }, latencyP99: latency.map { 90 + $0 }
            )
        }
    }

    static let failing = sample(checks: [
        VerdictCheck(name: "devices equal PostgreSQL", passed: true, detail: "50 devices equal to PostgreSQL"),
        VerdictCheck(name: "no lost writes", passed: false, detail: "task 17 differs\ndevice: title <b>&\nserver: title x"),
    ])

    static func line(_ text: String, containing needle: String) -> String? {
        text.split(separator: "\n").map(String.init).first { $0.contains(needle) }
    }

    /// The row labelled `label` in the table's block titled `section`.
    static func row(_ table: String, _ section: String, _ label: String) -> String? {
        let block = table.components(separatedBy: "\n\n").first { $0.hasPrefix(section + "\n") } ?? ""
        return block.split(separator: "\n").map(String.init).first { $0.hasPrefix("  " + label + "  ") }
    }

    // MARK: Terminal table

    @Test func tableLeadsWithTheVerdictThenSeedReasonsAndLatency() throws {
        let table = ReportTable.render(Self.sample())
        #expect(table.hasPrefix("VERDICT PASS  (2/2 checks held)\n"))
        #expect(Self.row(table, "VERDICT PASS  (2/2 checks held)", "devices equal PostgreSQL")?.contains(" ok ") == true)
        #expect(Self.row(table, "RUN", "seed")?.hasSuffix(" 8675309") == true)
        #expect(Self.row(table, "RUN", "replay")?.hasSuffix("revsync-sim soak --seed 8675309 --server http://127.0.0.1:8080") == true)
        #expect(Self.row(table, "REJECTED BY REASON", "stale_revision")?.hasSuffix(" 31") == true)
        #expect(Self.row(table, "REJECTED BY REASON", "deleted")?.hasSuffix(" 4") == true)
        #expect(Self.row(table, "FAULTS INJECTED", "reset_mid_request")?.hasSuffix(" 120") == true)
        #expect(Self.row(table, "CHANGE SETS", "retries")?.hasSuffix(" 77") == true)
        #expect(Self.row(table, "CHANGE SETS", "rejected")?.hasSuffix(" 35") == true)
        let devices = try #require(Self.row(table, "CATCH-UP LATENCY", "devices"))
        for figure in ["9,000", "12.3 ms", "45.6 ms", "120.0 ms", "912.7 ms"] { #expect(devices.contains(figure)) }
        let server = try #require(Self.row(table, "CATCH-UP LATENCY", "server"))
        #expect(server.split(separator: " ").dropFirst() == ["n/a", "n/a", "n/a", "n/a", "n/a"])
        #expect(Self.row(table, "BYTES", "requests")?.hasSuffix(" 4.00x") == true)
        #expect(Self.row(table, "BYTES", "total")?.hasSuffix(" 7.56x") == true)
        #expect(Self.row(table, "BYTES", "responses")?.contains("76.3 MiB") == true)
        #expect(Self.row(table, "CONVERGENCE", "time to converge")?.hasSuffix(" 8.5 s") == true)
    }

    @Test func deviceSideFaultsTheirChecksAndRevokedDevicesShowInTheTablePageAndJSON() throws {
        var report = Self.sample(checks: [
            VerdictCheck(name: "acknowledged content", passed: true, detail: "812 of 812 acknowledged change sets hold what their device sent"),
            VerdictCheck(name: "revoked tokens", passed: false, detail: "1 revoked devices got 2xx answers: device d1: 1 accepted, 3 refused"),
        ])
        report.settings.deviceFaults = ["device_restore", "device_revoke", "device_role_downgrade"]
        report.faults["device_restore"] = 1
        report.faults["device_revoke"] = 1
        report.faults["device_role_downgrade"] = 1
        report.convergence.devices = 49
        report.convergence.convergedDevices = 49
        report.convergence.revokedDevices = 1

        let table = ReportTable.render(report)
        #expect(Self.row(table, "SETTINGS", "device faults")?.hasSuffix("  device_restore, device_revoke, device_role_downgrade") == true)
        #expect(Self.row(table, "SETTINGS", "server faults")?.hasSuffix("  server_kill") == true)
        for kind in ["device_restore", "device_revoke", "device_role_downgrade"] {
            #expect(Self.row(table, "FAULTS INJECTED", kind)?.hasSuffix(" 1") == true, "\(kind)")
        }
        #expect(Self.row(table, "CONVERGENCE", "converged devices")?.hasSuffix(" 49/49") == true)
        #expect(Self.row(table, "CONVERGENCE", "revoked (not compared)")?.hasSuffix(" 1") == true)
        #expect(Self.line(table, containing: "acknowledged content")?.contains(" ok ") == true)
        #expect(Self.line(table, containing: "revoked tokens")?.contains(" FAIL ") == true)
        #expect(Self.row(Self.sampleTable, "CONVERGENCE", "revoked (not compared)") == nil)

        let html = ReportHTML.render(report)
        #expect(html.contains("<tr><th>device faults</th><td>device_restore, device_revoke, device_role_downgrade</td></tr>"))
        #expect(html.contains("<tr><th>revoked (not compared)</th><td>1</td></tr>"))
        #expect(html.contains("<tr><td>revoked tokens</td><td class=\"bad\">FAIL</td>"))

        let json = try JSONEncoder().encode(report)
        #expect(try JSONDecoder().decode(SoakReport.self, from: json) == report)
        let text = String(decoding: json, as: UTF8.self)
        #expect(text.contains("\"deviceFaults\":[\"device_restore\",\"device_revoke\",\"device_role_downgrade\"]"))
        #expect(text.contains("\"revokedDevices\":1"))
    }

    @Test func writeToVisibleLatencyAndTheLongPollShowInTheTablePageAndJSON() throws {
        var report = Self.sample()
        report.settings.longPollWaitSeconds = 25
        report.operations.longPolls = 900
        report.operations.longPollsWithChanges = 700
        report.writeToVisible = WriteToVisibleLatency(
            latency: LatencyPercentiles(count: 48_000, p50: 210.5, p90: 640.25, p99: 2_500, max: 61_000), acknowledgements: 1_000,
            seenBeforeAcknowledgement: 300, dropped: 120, unresolved: 2)

        let table = ReportTable.render(report)
        #expect(Self.row(table, "SETTINGS", "long-poll wait")?.hasSuffix("  25.0 s") == true)
        #expect(Self.row(table, "OPERATIONS", "long-polls answered")?.hasSuffix(" 900") == true)
        #expect(Self.row(table, "OPERATIONS", "long-polls with changes")?.hasSuffix(" 700") == true)
        let section = "WRITE-TO-VISIBLE LATENCY"
        #expect(Self.row(table, section, "samples")?.hasSuffix("  48,000") == true)
        #expect(Self.row(table, section, "p50")?.hasSuffix("  210.5 ms") == true)
        #expect(Self.row(table, section, "p90")?.hasSuffix("  640.2 ms") == true || Self.row(table, section, "p90")?.hasSuffix("  640.3 ms") == true)
        #expect(Self.row(table, section, "p99")?.hasSuffix("  2500.0 ms") == true)
        #expect(Self.row(table, section, "dropped (went offline first)")?.hasSuffix("  120") == true)
        #expect(Self.row(table, section, "never seen")?.hasSuffix("  2") == true)
        #expect(table.range(of: "CATCH-UP LATENCY")?.lowerBound ?? table.endIndex < table.range(of: section)?.lowerBound ?? table.startIndex)
        // Without the figures (an older report), neither the section nor the setting shows.
        #expect(!Self.sampleTable.contains(section))
        #expect(Self.row(Self.sampleTable, "SETTINGS", "long-poll wait") == nil)
        var polling = report
        polling.settings.longPollWaitSeconds = 0
        #expect(Self.row(ReportTable.render(polling), "SETTINGS", "long-poll wait")?.hasSuffix("  off (polling)") == true)

        let html = ReportHTML.render(report)
        #expect(html.contains("Write-to-visible latency"))
        #expect(html.contains("<tr><th>p99</th><td>2500.0 ms</td></tr>"))

        let json = try JSONEncoder().encode(report)
        #expect(try JSONDecoder().decode(SoakReport.self, from: json) == report)
        let text = String(decoding: json, as: UTF8.self)
        #expect(text.contains("\"writeToVisible\":{"))
        #expect(text.contains("\"longPollWaitSeconds\":25"))
    }

    static var sampleTable: String { ReportTable.render(sample()) }

    @Test func tableAlignsColumns() throws {
        let table = ReportTable.render(Self.sample())
        let stale = try #require(Self.line(table, containing: "stale_revision"))
        let deleted = try #require(Self.line(table, containing: "deleted "))
        #expect(stale.count == deleted.count)
    }

    @Test func failingVerdictShowsFailAndTheViolatedDetail() throws {
        let table = ReportTable.render(Self.failing)
        #expect(table.hasPrefix("VERDICT FAIL"))
        #expect(table.contains("(1/2 checks held)"))
        let row = try #require(Self.line(table, containing: "no lost writes"))
        #expect(row.contains("FAIL"))
        #expect(row.hasSuffix("task 17 differs"))
        // The detail's further lines stay in the detail column.
        let continuation = try #require(Self.line(table, containing: "device: title <b>&"))
        #expect(continuation.firstIndex(of: "d").map { continuation.distance(from: continuation.startIndex, to: $0) }
            == row.range(of: "task")
            .map { row.distance(from: row.startIndex, to: $0.lowerBound) })
    }

    // MARK: HTML

    @Test func htmlIsOneOfflinePageWithAChartPerTimelineView() {
        let html = ReportHTML.render(Self.sample())
        #expect(html.hasPrefix("<!DOCTYPE html>"))
        #expect(!html.contains("http://"))
        #expect(!html.contains("https://"))
        #expect(!html.contains("<script"))
        #expect(!html.contains("<link"))
        #expect(html.components(separatedBy: "<svg").count - 1 == 4)
        #expect(html.contains("<style>"))
        // The replay command still reads as a URL in the browser.
        #expect(html.contains("--server http&#58;//127.0.0.1:8080"))
        for title in ["Catch-up latency", "Backlog and devices", "Conflicts and errors", "Head revision"] {
            #expect(html.contains("<figcaption>\(title)"))
        }
    }

    @Test func htmlShowsVerdictBannerAndSummaryFigures() {
        let passing = ReportHTML.render(Self.sample())
        #expect(passing.contains("<header class=\"banner pass\">\n<h1>PASS</h1>"))
        let failing = ReportHTML.render(Self.failing)
        #expect(failing.contains("<header class=\"banner fail\">\n<h1>FAIL</h1>"))
        #expect(failing.contains("<td class=\"bad\">FAIL</td>"))
        for figure in ["8675309", "stale_revision", "12.3 ms", "912.7 ms", "76.3 MiB", "7.56x"] {
            #expect(failing.contains(figure), "missing \(figure)")
        }
    }

    @Test func htmlEscapesText() {
        let html = ReportHTML.render(Self.failing)
        #expect(html.contains("device: title &lt;b&gt;&amp;"))
        #expect(!html.contains("<b>&"))
        #expect(HTMLEscaping.escape("a \"q\" <b>&</b> 'x'") == "a &quot;q&quot; &lt;b&gt;&amp;&lt;/b&gt; &#39;x&#39;")
    }

    @Test func everyChartMarksEveryEvent() throws {
        let report = Self.sample()
        let html = ReportHTML.render(report)
        let charts = html.components(separatedBy: "<svg").dropFirst()
        #expect(charts.count == 4)
        for chart in charts {
            #expect(chart.components(separatedBy: "class=\"marker\"").count - 1 == report.events.count)
            #expect(chart.contains("<title>server_kill at 2.0 s: instance 1</title>"))
        }
        // Each legend names the event kinds once.
        #expect(html.components(separatedBy: "</span>server_kill</li>").count - 1 == 4)
        #expect(html.contains("<table class=\"events\">"))
    }

    @Test func missingLatencySamplesLeaveAGap() throws {
        let chart = try #require(ReportCharts.charts(Self.sample()).first)
        let svg = chart.svg()
        // p50 and p99 each break at t = 3: two segments apiece.
        let paths = svg.components(separatedBy: "<path d=\"").dropFirst()
        #expect(paths.count == 2)
        for path in paths { #expect(path.prefix(while: { $0 != "\"" }).filter { $0 == "M" }.count == 2) }
    }

    @Test func emptyTimelineAndOddValuesRender() {
        let empty = Self.sample(timeline: [], events: [])
        let html = ReportHTML.render(empty)
        #expect(html.components(separatedBy: "<svg").count - 1 == 4)
        #expect(html.contains("no samples"))
        #expect(html.contains("No events."))
        #expect(ReportTable.render(empty).hasPrefix("VERDICT PASS"))

        let odd = Self.sample(timeline: [
            TimelineSample(
                t: 0, online: 0, offline: 0, pending: 0, headRevision: 0, conflicts: 0, errors: 0,
                latencyP50: .nan, latencyP99: .infinity
            ),
            TimelineSample(
                t: .nan, online: 1, offline: 0, pending: 0, headRevision: 0, conflicts: 0, errors: 0,
                latencyP50: nil, latencyP99: nil
            ),
        ])
        let oddHTML = ReportHTML.render(odd)
        #expect(!oddHTML.contains("nan"))
        #expect(oddHTML.components(separatedBy: "<svg").count - 1 == 4)
    }

    // MARK: Axes

    @Test func axesUseRoundTicks() {
        let values = ChartAxis(covering: [0, 1843], targetTicks: 4)
        #expect(values.ticks == [0, 500, 1000, 1500, 2000])
        let time = ChartAxis(covering: [0, 330], targetTicks: 6, roundUpper: false)
        #expect(time.upper == 330)
        #expect(time.ticks == [0, 100, 200, 300])
        #expect(ChartAxis(covering: [], targetTicks: 4).ticks.count > 1)
        #expect(ChartAxis(covering: [0, 40_000], targetTicks: 4).label(12_500) == "12.5k")
        #expect(ChartAxis(covering: [0, 0.3], targetTicks: 4).label(0.1) == "0.1")
    }

    // MARK: Writer

    @Test func writerWritesJSONThatDecodesBackEqualAndTheHTMLPage() throws {
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("revsync-report-\(UUID().uuidString)/nested").path
        defer { try? FileManager.default.removeItem(atPath: (directory as NSString).deletingLastPathComponent) }
        let report = Self.failing
        let paths = try ReportWriter.write(report, to: directory, name: "soak-8675309")
        #expect(paths.json == directory + "/soak-8675309.json")
        #expect(paths.html == directory + "/soak-8675309.html")
        let json = try Data(contentsOf: URL(fileURLWithPath: paths.json))
        #expect(try JSONDecoder().decode(SoakReport.self, from: json) == report)
        #expect(String(decoding: json, as: UTF8.self).contains("\n  \"bytes\" : {"))
        let html = try String(contentsOfFile: paths.html, encoding: .utf8)
        #expect(html == ReportHTML.render(report))
    }

    @Test func writerErrorNamesThePath() throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("revsync-report-\(UUID().uuidString)").path
        try Data("not a directory".utf8).write(to: URL(fileURLWithPath: file))
        defer { try? FileManager.default.removeItem(atPath: file) }
        let error = #expect(throws: ReportWriteError.self) {
            try ReportWriter.write(Self.sample(), to: file + "/reports", name: "soak")
        }
        #expect(error?.description.contains(file) == true)
    }

    // MARK: Progress line

    @Test func progressLineIsOneCompactLine() {
        let snapshot = ProgressSnapshot(
            elapsedSeconds: 42.7, phase: "workload", online: 47, offline: 3, pending: 12, headRevision: 1843,
            conflicts: 31, errors: 7, acknowledged: 1200
        )
        #expect(
            ProgressLine.format(snapshot)
                == "[  42s workload] online 47/50 offline 3 pending 12 head 1843 acked 1200 conflicts 31 errors 7"
        )
        var odd = snapshot
        odd.elapsedSeconds = .nan
        #expect(ProgressLine.format(odd).hasPrefix("[   0s workload]"))
        odd.elapsedSeconds = 12_345
        #expect(ProgressLine.format(odd).hasPrefix("[12345s workload]"))
    }
}

@Suite struct SnapshotDownloadTallyTests {
    @Test func eachSnapshotExchangeCountsOnce() {
        var tally = SnapshotDownloads()
        tally.record(sqliteFile: true, status: 200)
        tally.record(sqliteFile: true, status: nil)
        tally.record(sqliteFile: true, status: 206)
        tally.record(sqliteFile: false, status: 200)
        tally.record(sqliteFile: true, status: 503)
        #expect(tally == { var t = SnapshotDownloads(); t.files = 1; t.cut = 1; t.resumed = 1; t.json = 1; t.failed = 1; return t }())
        let section = ReportSection.snapshots(tally)
        #expect(section.rows.first == ["SQLite files, whole", "1"])
    }
}
