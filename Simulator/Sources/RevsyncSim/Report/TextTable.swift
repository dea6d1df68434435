/// Plain-text columns padded to their widest cell. A cell with line breaks (a verdict
/// detail showing both sides of a differing record) continues on the following lines
/// in its own column.
struct TextTable {
    var header: [String]?
    var rows: [[String]]
    /// Columns after the first align right.
    var numeric: Bool
    var indent = "  "

    func lines() -> [String] {
        let headerLines = header.map { Self.physicalLines($0) } ?? []
        let bodyLines = rows.flatMap { Self.physicalLines($0) }
        let columns = (headerLines + bodyLines).map(\.count).max() ?? 0
        guard columns > 0 else { return [] }
        var widths = Array(repeating: 0, count: columns)
        for line in headerLines + bodyLines {
            for (index, cell) in line.enumerated() { widths[index] = max(widths[index], cell.count) }
        }
        var out = headerLines.map { format($0, widths) }
        if !headerLines.isEmpty {
            out.append(indent + widths.map { String(repeating: "-", count: $0) }.joined(separator: "  "))
        }
        out += bodyLines.map { format($0, widths) }
        return out
    }

    private func format(_ cells: [String], _ widths: [Int]) -> String {
        var parts: [String] = []
        for (index, width) in widths.enumerated() {
            let cell = index < cells.count ? cells[index] : ""
            let padding = String(repeating: " ", count: max(0, width - cell.count))
            parts.append(numeric && index > 0 ? padding + cell : cell + padding)
        }
        let line = indent + parts.joined(separator: "  ")
        return String(line.reversed().drop(while: { $0 == " " }).reversed())
    }

    private static func physicalLines(_ row: [String]) -> [[String]] {
        let split = row.map { $0.split(separator: "\n", omittingEmptySubsequences: false).map(String.init) }
        let height = split.map(\.count).max() ?? 0
        return (0..<height).map { line in split.map { line < $0.count ? $0[line] : "" } }
    }
}
