/// The four timeline charts of the HTML page, each carrying the run's events as markers.
enum ReportCharts {
    static let phases: Set<String> = ["workload", "heal", "drain", "verdict"]
    /// Distinct hues for fault kinds; phases are drawn grey and solid so faults stand out.
    static let palette = ["#d62728", "#9467bd", "#8c564b", "#e377c2", "#bcbd22", "#17becf", "#ff7f0e", "#1f77b4"]
    static let phaseColor = "#6b7280"

    static func charts(_ report: SoakReport) -> [LineChart] {
        let samples = report.timeline
        let markers = markers(report.events)
        func series(_ name: String, _ color: String, right: Bool = false, _ value: (TimelineSample) -> Double?)
            -> ChartSeries
        {
            ChartSeries(name: name, color: color, points: samples.map { .init(x: $0.t, y: value($0)) }, onRightAxis: right)
        }
        return [
            LineChart(title: "Catch-up latency", leftLabel: "ms", rightLabel: nil, series: [
                series("p50", "#1f77b4") { $0.latencyP50 },
                series("p99", "#d62728") { $0.latencyP99 },
            ], markers: markers),
            LineChart(title: "Backlog and devices", leftLabel: "pending change sets", rightLabel: "devices", series: [
                series("pending change sets", "#ff7f0e") { Double($0.pending) },
                series("online devices", "#2ca02c", right: true) { Double($0.online) },
                series("offline devices", "#7f7f7f", right: true) { Double($0.offline) },
            ], markers: markers),
            LineChart(title: "Conflicts and errors (cumulative)", leftLabel: "count", rightLabel: nil, series: [
                series("conflicts", "#9467bd") { Double($0.conflicts) },
                series("errors", "#d62728") { Double($0.errors) },
            ], markers: markers),
            LineChart(title: "Head revision", leftLabel: "revision", rightLabel: nil, series: [
                series("head revision", "#1f77b4") { Double($0.headRevision) },
            ], markers: markers),
        ]
    }

    static func markers(_ events: [TimelineEvent]) -> [ChartMarker] {
        let colors = faultColors(events)
        return events.map { event in
            let phase = phases.contains(event.kind)
            return ChartMarker(
                x: event.t, kind: event.kind, detail: event.detail,
                color: phase ? phaseColor : colors[event.kind] ?? phaseColor, dashed: !phase
            )
        }
    }

    /// Colours by the kinds' sorted order, so every chart of one report agrees.
    static func faultColors(_ events: [TimelineEvent]) -> [String: String] {
        let kinds = Set(events.map(\.kind)).subtracting(phases).sorted()
        var colors: [String: String] = [:]
        for (index, kind) in kinds.enumerated() { colors[kind] = palette[index % palette.count] }
        return colors
    }
}
