import Foundation

/// The memory lines of /proc/PID/status beyond `VmRSS`: the snapshot bench judges peaks, and a
/// process's current size says nothing of what it reached in between readings.
extension ProcessReadings {
    /// `VmHWM` of /proc/PID/status (the peak resident size since start, or since the last
    /// ``resetPeak()`` of that process), in bytes.
    static func peakResidentBytes(_ pid: Int32) throws -> Int {
        try statusBytes("VmHWM", of: "/proc/\(pid)/status")
    }

    /// `VmHWM` of this process.
    static func ownPeakResidentBytes() throws -> Int { try statusBytes("VmHWM", of: "/proc/self/status") }

    /// `VmRSS` of this process.
    static func ownResidentBytes() throws -> Int { try statusBytes("VmRSS", of: "/proc/self/status") }

    /// Lowers this process's `VmHWM` to its current size (Linux: `5` to /proc/self/clear_refs),
    /// so that the next reading is the peak of what ran in between.
    /// - Returns: whether the kernel took it (false leaves the peak since start).
    static func resetPeak() -> Bool {
        (try? "5".write(toFile: "/proc/self/clear_refs", atomically: false, encoding: .utf8)) != nil
    }

    /// A `kB` line of a /proc status file, in bytes.
    private static func statusBytes(_ key: String, of path: String) throws -> Int {
        let status = try String(contentsOfFile: path, encoding: .utf8)
        guard let line = status.split(separator: "\n").first(where: { $0.hasPrefix(key + ":") }),
            let kilobytes = line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first.flatMap({ Int($0) })
        else { throw BenchError("no \(key) in \(path): is the process still running?") }
        return kilobytes * 1024
    }
}
