import Foundation

extension LineChart {
    /// Inline SVG (no xmlns: HTML5 does not need it, and the page holds no URL at all).
    func svg(width: Double = 720, height: Double = 240) -> String {
        let plot = (left: 60.0, right: width - (hasRightAxis ? 60 : 20), top: 12.0, bottom: height - 34)
        let x = xAxis
        let yLeft = yAxis(right: false)
        let yRight = yAxis(right: true)
        func px(_ value: Double) -> Double { x.position(value, from: plot.left, to: plot.right) }
        func py(_ value: Double, _ axis: ChartAxis) -> Double { axis.position(value, from: plot.bottom, to: plot.top) }

        var out = "<svg class=\"chart\" viewBox=\"0 0 \(n(width)) \(n(height))\" role=\"img\""
        out += " aria-label=\"\(HTMLEscaping.escape(title))\">\n"
        for tick in yLeft.ticks {
            let y = py(tick, yLeft)
            out += "<line class=\"grid\" x1=\"\(n(plot.left))\" x2=\"\(n(plot.right))\" y1=\"\(n(y))\" y2=\"\(n(y))\"/>"
            out += "<text class=\"tick\" x=\"\(n(plot.left - 6))\" y=\"\(n(y + 4))\" text-anchor=\"end\">"
            out += "\(yLeft.label(tick))</text>\n"
        }
        if hasRightAxis {
            for tick in yRight.ticks {
                let y = py(tick, yRight)
                out += "<text class=\"tick\" x=\"\(n(plot.right + 6))\" y=\"\(n(y + 4))\">\(yRight.label(tick))</text>\n"
            }
        }
        for tick in x.ticks {
            let position = px(tick)
            out += "<line class=\"axis\" x1=\"\(n(position))\" x2=\"\(n(position))\" y1=\"\(n(plot.bottom))\""
            out += " y2=\"\(n(plot.bottom + 4))\"/>"
            out += "<text class=\"tick\" x=\"\(n(position))\" y=\"\(n(plot.bottom + 16))\" text-anchor=\"middle\">"
            out += "\(x.label(tick))s</text>\n"
        }
        out += "<line class=\"axis\" x1=\"\(n(plot.left))\" x2=\"\(n(plot.right))\" y1=\"\(n(plot.bottom))\""
        out += " y2=\"\(n(plot.bottom))\"/>\n"
        out += axisTitle(leftLabel, x: 14, y: (plot.top + plot.bottom) / 2)
        if let rightLabel, hasRightAxis { out += axisTitle(rightLabel, x: width - 8, y: (plot.top + plot.bottom) / 2) }
        out += "<text class=\"tick\" x=\"\(n(plot.right))\" y=\"\(n(height - 4))\" text-anchor=\"end\">seconds</text>\n"

        for marker in markers where marker.x.isFinite {
            let position = px(marker.x)
            let dash = marker.dashed ? " stroke-dasharray=\"5 3\"" : ""
            out += "<line class=\"marker\" x1=\"\(n(position))\" x2=\"\(n(position))\" y1=\"\(n(plot.top))\""
            out += " y2=\"\(n(plot.bottom))\" stroke=\"\(marker.color)\"\(dash)>"
            let label = "\(marker.kind) at \(ReportFormat.seconds(marker.x))"
            out += "<title>\(HTMLEscaping.escape(marker.detail.isEmpty ? label : label + ": " + marker.detail))</title>"
            out += "</line>\n"
        }
        for line in series {
            let axis = line.onRightAxis ? yRight : yLeft
            out += Self.path(line, x: px) { py($0, axis) }
        }
        if isEmpty {
            out += "<text class=\"empty\" x=\"\(n((plot.left + plot.right) / 2))\" y=\"\(n((plot.top + plot.bottom) / 2))\""
            out += " text-anchor=\"middle\">no samples</text>\n"
        }
        return out + "</svg>"
    }

    /// Runs of consecutive samples become path segments; a lone sample between gaps
    /// becomes a dot so it does not vanish.
    private static func path(_ line: ChartSeries, x: (Double) -> Double, y: (Double) -> Double) -> String {
        var runs: [[(Double, Double)]] = [[]]
        for point in line.points.sorted(by: { $0.x < $1.x }) {
            if point.x.isFinite, let value = point.y, value.isFinite {
                runs[runs.count - 1].append((x(point.x), y(value)))
            } else if !(runs.last?.isEmpty ?? true) {
                runs.append([])
            }
        }
        var d = ""
        var dots = ""
        for run in runs where !run.isEmpty {
            if run.count == 1, let dot = run.first {
                dots += "<circle cx=\"\(n(dot.0))\" cy=\"\(n(dot.1))\" r=\"2\" fill=\"\(line.color)\"/>"
                continue
            }
            for (index, (px, py)) in run.enumerated() { d += "\(index == 0 ? "M" : "L")\(n(px)) \(n(py)) " }
        }
        let name = HTMLEscaping.escape(line.name)
        var out = "<g class=\"series\"><title>\(name)</title>"
        if !d.isEmpty { out += "<path d=\"\(d.dropLast())\" stroke=\"\(line.color)\" fill=\"none\"/>" }
        return out + dots + "</g>\n"
    }

    private func axisTitle(_ text: String, x: Double, y: Double) -> String {
        "<text class=\"axis-title\" x=\"\(n(x))\" y=\"\(n(y))\" text-anchor=\"middle\""
            + " transform=\"rotate(-90 \(n(x)) \(n(y)))\">\(HTMLEscaping.escape(text))</text>\n"
    }
}

/// SVG coordinates with one decimal: enough for a 720-wide picture, short to write.
private func n(_ value: Double) -> String {
    ReportFormat.decimal(value, places: 1)
}
