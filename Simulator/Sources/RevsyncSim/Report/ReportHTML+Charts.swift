extension ReportHTML {
    /// A chart with its legend: the series, then each event kind once, in order of first appearance.
    static func figure(_ chart: LineChart) -> String {
        var html = "<figure>\n<figcaption>\(HTMLEscaping.escape(chart.title))</figcaption>\n"
        html += chart.svg() + "\n<ul class=\"legend\">"
        for series in chart.series {
            let side = series.onRightAxis ? " (right axis)" : ""
            html += "<li><span class=\"line\" style=\"border-color:\(series.color)\"></span>"
            html += "\(HTMLEscaping.escape(series.name + side))</li>"
        }
        var seen: Set<String> = []
        for marker in chart.markers where seen.insert(marker.kind).inserted {
            let style = marker.dashed ? "dashed" : "solid"
            html += "<li><span class=\"mark\" style=\"border-color:\(marker.color);border-left-style:\(style)\"></span>"
            html += "\(HTMLEscaping.escape(marker.kind))</li>"
        }
        return html + "</ul>\n</figure>\n"
    }
}
