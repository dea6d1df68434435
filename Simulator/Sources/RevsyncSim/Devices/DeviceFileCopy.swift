import Foundation

/// A copy of a device's SQLite file, taken while no engine had it open: the main
/// file and its write-ahead log if one was left (the shared-memory index is
/// rebuilt from the log when the file is opened again).
struct DeviceFileCopy: Sendable {
    let path: String
    private let hasLog: Bool

    /// Copies the closed database at `source` to `path` (replacing an older copy).
    static func take(of source: String, to path: String) throws -> DeviceFileCopy {
        let files = FileManager.default
        for suffix in ["", "-wal", "-shm"] { try? files.removeItem(atPath: path + suffix) }
        try files.copyItem(atPath: source, toPath: path)
        let hasLog = files.fileExists(atPath: source + "-wal")
        if hasLog { try files.copyItem(atPath: source + "-wal", toPath: path + "-wal") }
        return DeviceFileCopy(path: path, hasLog: hasLog)
    }

    /// Puts the copy in place of the closed database at `target`, dropping its log and index.
    func restore(over target: String) throws {
        let files = FileManager.default
        for suffix in ["", "-wal", "-shm"] where files.fileExists(atPath: target + suffix) {
            try files.removeItem(atPath: target + suffix)
        }
        try files.copyItem(atPath: path, toPath: target)
        if hasLog { try files.copyItem(atPath: path + "-wal", toPath: target + "-wal") }
    }
}
