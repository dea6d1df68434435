/// One line of a chart; a nil `y` leaves a gap instead of joining across missing samples.
struct ChartSeries: Equatable {
    struct Point: Equatable {
        var x: Double
        var y: Double?
    }

    var name: String
    /// A CSS colour.
    var color: String
    var points: [Point]
    /// Plotted against the right-hand axis, for a quantity of another scale.
    var onRightAxis = false
}

/// A vertical line marking an event (a fault or a phase change) at `x`.
struct ChartMarker: Equatable {
    var x: Double
    var kind: String
    var detail: String
    var color: String
    var dashed: Bool
}

/// A line chart over time: what to draw, independent of SVG.
struct LineChart: Equatable {
    var title: String
    var leftLabel: String
    var rightLabel: String?
    var series: [ChartSeries]
    var markers: [ChartMarker]

    var hasRightAxis: Bool { series.contains(where: \.onRightAxis) }

    /// Covers every sample and every marker, so an event after the last sample still shows.
    var xAxis: ChartAxis {
        ChartAxis(covering: series.flatMap { $0.points.map(\.x) } + markers.map(\.x), targetTicks: 6, roundUpper: false)
    }

    func yAxis(right: Bool) -> ChartAxis {
        let values = series.filter { $0.onRightAxis == right }.flatMap { $0.points.compactMap(\.y) }
        return ChartAxis(covering: values, targetTicks: 4)
    }

    var isEmpty: Bool {
        !series.contains { $0.points.contains { $0.x.isFinite && ($0.y?.isFinite ?? false) } }
    }
}
