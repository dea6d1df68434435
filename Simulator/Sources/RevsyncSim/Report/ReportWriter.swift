import Foundation

/// A report file that could not be written, naming the path.
public struct ReportWriteError: Error, CustomStringConvertible {
    public var path: String
    public var reason: String

    public var description: String { "cannot write report \(path): \(reason)" }
}

/// Writes a run's report as JSON (the data) and HTML (the page to read).
public enum ReportWriter {
    /// Creates `directory` if needed and writes `<name>.json` and `<name>.html` into it.
    /// - Returns: the two paths written.
    public static func write(_ report: SoakReport, to directory: String, name: String) throws -> (json: String, html: String) {
        let folder = URL(fileURLWithPath: directory, isDirectory: true)
        let jsonURL = folder.appendingPathComponent(name + ".json")
        let htmlURL = folder.appendingPathComponent(name + ".html")
        do {
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        } catch {
            throw ReportWriteError(path: folder.path, reason: "cannot create directory: \(error.localizedDescription)")
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        let json: Data
        do {
            json = try encoder.encode(report)
        } catch {
            // A NaN or infinite figure is not JSON; the error says which file it kept from being written.
            throw ReportWriteError(path: jsonURL.path, reason: "cannot encode: \(error)")
        }
        try save(json, to: jsonURL)
        try save(Data(ReportHTML.render(report).utf8), to: htmlURL)
        return (json: jsonURL.path, html: htmlURL.path)
    }

    private static func save(_ data: Data, to url: URL) throws {
        do {
            try data.write(to: url, options: .atomic)
        } catch {
            throw ReportWriteError(path: url.path, reason: error.localizedDescription)
        }
    }
}
