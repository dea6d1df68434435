import Foundation

/// The end of a log file, for error messages about a process that misbehaved.
enum LogTail {
    /// The last `lines` lines of the file (reading at most its last 64 KiB), or a note that it cannot be read.
    static func lastLines(of path: String, lines: Int = 20) -> String {
        guard let handle = FileHandle(forReadingAtPath: path) else { return "(no log at \(path))" }
        defer { try? handle.close() }
        let window: UInt64 = 64 * 1024
        let size = (try? handle.seekToEnd()) ?? 0
        try? handle.seek(toOffset: size > window ? size - window : 0)
        let data = (try? handle.readToEnd()) ?? Data()
        let text = String(decoding: data, as: UTF8.self)
        let tail = text.split(separator: "\n", omittingEmptySubsequences: false).suffix(lines + 1).joined(separator: "\n")
        let trimmed = tail.trimmingCharacters(in: .whitespacesAndNewlines)
        return trimmed.isEmpty ? "(the log is empty)" : trimmed
    }
}
