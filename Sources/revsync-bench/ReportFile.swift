import Foundation

/// A bench report, written as pretty, key-sorted JSON (under reports/ by Scripts/bench).
protocol ReportFile: Encodable {}

extension ReportFile {
    func write(to path: String) throws {
        let url = URL(fileURLWithPath: path)
        try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        try encoder.encode(self).write(to: url)
    }
}
