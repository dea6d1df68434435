import Foundation
import Synchronization

/// Where one run of the instance writes what is not (yet) a published snapshot file: a
/// build's scratch file and the JSON snapshots' spools. A directory `work-<uuid>` inside the
/// snapshot directory, holding a `lock` file the instance keeps locked (`flock`) for as long
/// as it runs.
///
/// The lock is what lets any instance sharing the directory tell a killed instance's leftovers
/// from a live one's: the kernel releases a lock when its process ends, however it ends, so
/// a work directory whose lock can be taken belongs to nobody (`removeAbandoned`). Process ids
/// could not tell that: instances in containers are all pid 1, and a shared directory may
/// span hosts. A work directory is made under a `pending-` name and renamed once its lock is
/// held, so that no sweep ever sees a `work-` directory whose owner has not locked it yet.
final class SnapshotWorkDirectory: Sendable {
    static let prefix = "work-"
    static let pendingPrefix = "pending-work-"
    static let lockName = "lock"

    let parent: String
    private let held: Mutex<(path: String, lock: Int32)?> = Mutex(nil)

    init(parent: String) {
        self.parent = parent
    }

    deinit {
        held.withLock { if let held = $0 { close(held.lock) } }
    }

    /// The directory's path, made (or made again, if something removed it) and locked first.
    func path() throws -> String {
        try held.withLock { held in
            if let current = held, FileManager.default.fileExists(atPath: current.path) { return current.path }
            if let current = held { close(current.lock) }
            held = nil
            let made = try Self.make(in: parent)
            held = made
            return made.path
        }
    }

    /// Unlocks and removes the directory (the instance stops).
    func remove() {
        held.withLock { held in
            guard let current = held else { return }
            try? FileManager.default.removeItem(atPath: current.path)
            close(current.lock)
            held = nil
        }
    }

    private static func make(in parent: String) throws -> (path: String, lock: Int32) {
        try FileManager.default.createDirectory(atPath: parent, withIntermediateDirectories: true)
        let id = UUID().uuidString.lowercased()
        let pending = parent + "/" + pendingPrefix + id
        try FileManager.default.createDirectory(atPath: pending, withIntermediateDirectories: false)
        let lock = open(pending + "/" + lockName, O_CREAT | O_RDWR | O_CLOEXEC, 0o600)
        guard lock >= 0 else { throw failure("cannot create the lock file of", pending) }
        guard flock(lock, LOCK_EX | LOCK_NB) == 0 else {
            close(lock)
            throw failure("cannot lock", pending)
        }
        let path = parent + "/" + prefix + id
        guard rename(pending, path) == 0 else {
            close(lock)
            throw failure("cannot rename", pending)
        }
        return (path, lock)
    }

    /// Removes the work directories of `directory` whose lock nobody holds (their instances
    /// were killed, or stopped without removing them), except `keeping`'s; and `pending-`
    /// ones left for more than `pendingFor` (an instance killed while making its own). Returns
    /// how many it removed.
    @discardableResult
    static func removeAbandoned(in directory: String, keeping own: SnapshotWorkDirectory?, pendingFor: Duration = .seconds(3600), now: Date = Date())
        -> Int
    {
        let ownPath = own?.held.withLock { $0?.path }
        var removed = 0
        for name in (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? [] {
            let path = directory + "/" + name
            if name.hasPrefix(prefix), path != ownPath {
                let lock = open(path + "/" + lockName, O_RDWR | O_CLOEXEC)
                // No lock file: not made by this code (left alone), or being removed by another sweep.
                guard lock >= 0 else { continue }
                defer { close(lock) }
                guard flock(lock, LOCK_EX | LOCK_NB) == 0 else { continue }  // its instance runs
                if (try? FileManager.default.removeItem(atPath: path)) != nil { removed += 1 }
            } else if name.hasPrefix(pendingPrefix), let modified = SnapshotFileCatalog.modification(of: path), now.timeIntervalSince(modified) >= pendingFor.seconds {
                if (try? FileManager.default.removeItem(atPath: path)) != nil { removed += 1 }
            }
        }
        return removed
    }

    private static func failure(_ what: String, _ path: String) -> CocoaError {
        CocoaError(.fileWriteUnknown, userInfo: [NSFilePathErrorKey: path, NSLocalizedDescriptionKey: "\(what) \(path): \(String(cString: strerror(errno)))"])
    }
}
