/// The report as one self-contained HTML page: inline CSS and inline SVG charts, no
/// script and no external resource, so it opens offline from a CI artefact.
public enum ReportHTML {
    /// Renders the verdict, the summary tables, the timeline charts and the events.
    public static func render(_ report: SoakReport) -> String {
        let verdict = report.verdict.passed ? "PASS" : "FAIL"
        var html = """
            <!DOCTYPE html>
            <html lang="en">
            <head>
            <meta charset="utf-8">
            <meta name="viewport" content="width=device-width, initial-scale=1">
            <title>Revsync soak \(verdict) — seed \(report.seed)</title>
            <style>\(style)</style>
            </head>
            <body>
            <main>

            """
        html += banner(report)
        html += "<section>\n<h2>Checks</h2>\n\(checksTable(report.verdict))</section>\n"
        html += "<section class=\"summary\">\n"
        for section in ReportSection.summary(report) { html += table(section) }
        html += "</section>\n"
        html += "<section>\n<h2>Timeline</h2>\n"
        if report.timeline.isEmpty { html += "<p class=\"note\">No timeline samples were recorded.</p>\n" }
        for chart in ReportCharts.charts(report) { html += figure(chart) }
        html += "</section>\n"
        html += "<section>\n<h2>Events</h2>\n\(eventsTable(report.events))</section>\n"
        return html + "</main>\n</body>\n</html>\n"
    }

    static func banner(_ report: SoakReport) -> String {
        let passed = report.verdict.passed
        let held = report.verdict.checks.count - report.verdict.violations.count
        return """
            <header class="banner \(passed ? "pass" : "fail")">
            <h1>\(passed ? "PASS" : "FAIL")</h1>
            <p>\(held) of \(report.verdict.checks.count) checks held · seed \(report.seed) · \
            started \(HTMLEscaping.escape(report.startedAt)) · \(ReportFormat.seconds(report.totalSeconds))</p>
            <p>replay: <code>\(HTMLEscaping.escape(report.settings.replay))</code></p>
            </header>

            """
    }
}
