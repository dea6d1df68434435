/// A titled block of the report's figures as strings. The terminal table and the HTML
/// page both render these, so the two never disagree on what a figure is.
struct ReportSection: Equatable, Sendable {
    var title: String
    /// Column titles; nil for label/value pairs.
    var header: [String]?
    var rows: [[String]]
    /// Columns after the first hold numbers and align right.
    var numeric: Bool

    init(title: String, header: [String]? = nil, rows: [[String]], numeric: Bool = false) {
        self.title = title
        self.header = header
        self.rows = rows
        self.numeric = numeric
    }
}
