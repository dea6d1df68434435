/// The report as a plain-text table for the terminal at the end of a run.
public enum ReportTable {
    /// Renders the verdict first, then the run's figures, one titled block each.
    public static func render(_ report: SoakReport) -> String {
        var lines = verdictLines(report.verdict)
        for section in ReportSection.summary(report) {
            lines.append("")
            lines.append(section.title.uppercased())
            lines += TextTable(header: section.header, rows: section.rows, numeric: section.numeric).lines()
        }
        return lines.joined(separator: "\n") + "\n"
    }

    static func verdictLines(_ verdict: VerdictSummary) -> [String] {
        let held = verdict.checks.count - verdict.violations.count
        var lines = ["VERDICT \(verdict.passed ? "PASS" : "FAIL")  (\(held)/\(verdict.checks.count) checks held)"]
        let rows = verdict.checks.map { [$0.name, $0.passed ? "ok" : "FAIL", $0.detail] }
        lines += TextTable(header: ["check", "result", "detail"], rows: rows, numeric: false).lines()
        return lines
    }
}
