extension ReportHTML {
    static func checksTable(_ verdict: VerdictSummary) -> String {
        var html = "<table class=\"checks\">\n<thead><tr><th>check</th><th>result</th><th>detail</th></tr></thead>\n<tbody>\n"
        for check in verdict.checks {
            let result = check.passed ? "<td class=\"ok\">ok</td>" : "<td class=\"bad\">FAIL</td>"
            html += "<tr><td>\(HTMLEscaping.escape(check.name))</td>\(result)"
            html += "<td class=\"detail\">\(HTMLEscaping.escape(check.detail))</td></tr>\n"
        }
        if verdict.checks.isEmpty { html += "<tr><td colspan=\"3\">No checks ran.</td></tr>\n" }
        return html + "</tbody>\n</table>\n"
    }

    static func table(_ section: ReportSection) -> String {
        var html = "<table>\n<caption>\(HTMLEscaping.escape(section.title))</caption>\n"
        if let header = section.header {
            html += "<thead><tr>" + header.map { "<th>\(HTMLEscaping.escape($0))</th>" }.joined() + "</tr></thead>\n"
        }
        html += "<tbody>\n"
        for row in section.rows {
            html += "<tr>"
            for (index, cell) in row.enumerated() {
                let tag = index == 0 && section.header == nil ? "th" : "td"
                let align = section.numeric && index > 0 ? " class=\"num\"" : ""
                html += "<\(tag)\(align)>\(HTMLEscaping.escape(cell))</\(tag)>"
            }
            html += "</tr>\n"
        }
        return html + "</tbody>\n</table>\n"
    }

    static func eventsTable(_ events: [TimelineEvent]) -> String {
        guard !events.isEmpty else { return "<p class=\"note\">No events.</p>\n" }
        let colors = ReportCharts.faultColors(events)
        var html = "<table class=\"events\">\n<thead><tr><th>t</th><th>kind</th><th>detail</th></tr></thead>\n<tbody>\n"
        for event in events {
            let color = colors[event.kind] ?? ReportCharts.phaseColor
            html += "<tr><td class=\"num\">\(ReportFormat.seconds(event.t))</td>"
            html += "<td><span class=\"swatch\" style=\"background:\(color)\"></span>\(HTMLEscaping.escape(event.kind))</td>"
            html += "<td class=\"detail\">\(HTMLEscaping.escape(event.detail))</td></tr>\n"
        }
        return html + "</tbody>\n</table>\n"
    }
}
