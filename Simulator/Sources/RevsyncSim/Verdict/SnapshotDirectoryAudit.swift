import Foundation

/// The SQLite snapshot directory the soak's instances share (`REVSYNC_SNAPSHOT_DIR`), as the
/// verdict reads it: the work directory of every instance must be locked by a running one (a
/// killed instance's is removed by the others' sweep), and no replaced file may outstay its
/// grace (`REVSYNC_SNAPSHOT_KEEP_REPLACED_SECONDS`) by more than a sweep's interval.
public struct SnapshotDirectoryAudit: Sendable, Equatable {
    /// The soak's settings for the instances: files replaced and rebuilt often enough that a
    /// run of minutes sees the sweep at work (the server's defaults are 600 s and 300 s).
    public static let keepReplacedSeconds = 60
    public static let maxAgeSeconds = 60
    /// How late a replaced file may still be there: its grace, the server's sweep interval (half
    /// the grace, at most a minute) and 15 s for a sweep under load.
    static let overdueAfter: TimeInterval = TimeInterval(keepReplacedSeconds + min(60, keepReplacedSeconds / 2) + 15)

    /// A published file: `snapshot-<database>-r<revision>-v<schema version>-<sha-256>.sqlite`.
    public struct Published: Sendable, Equatable {
        public var name: String
        /// Database and schema version: the files that replace one another.
        public var group: String
        public var revision: Int64
        public var modified: Date

        public init(name: String, group: String, revision: Int64, modified: Date) {
            self.name = name
            self.group = group
            self.revision = revision
            self.modified = modified
        }

        init?(name: String, modified: Date) {
            guard name.hasPrefix("snapshot-"), name.hasSuffix(".sqlite") else { return nil }
            let parts = name.dropLast(".sqlite".count).split(separator: "-")
            guard parts.count == 5, parts[2].hasPrefix("r"), let revision = Int64(parts[2].dropFirst()) else { return nil }
            self.init(name: name, group: "\(parts[1])-\(parts[3])", revision: revision, modified: modified)
        }
    }

    public var published: [Published]
    /// `work-…` directories whose lock nobody holds: left by an instance that is gone.
    public var abandoned: [String]
    /// `work-…` directories locked by a running instance.
    public var locked: Int
    /// When the directory was read.
    public var now: Date

    public init(published: [Published], abandoned: [String], locked: Int, now: Date) {
        self.published = published
        self.abandoned = abandoned
        self.locked = locked
        self.now = now
    }

    /// Replaced files still there past `overdueAfter` from the publication of the file after them.
    public var overdue: [String] {
        Dictionary(grouping: published, by: \.group).values.flatMap { group -> [String] in
            let ordered = group.sorted { ($0.modified, $0.revision) < ($1.modified, $1.revision) }
            return zip(ordered, ordered.dropFirst()).compactMap { file, next in
                now.timeIntervalSince(next.modified) > Self.overdueAfter ? file.name : nil
            }
        }.sorted()
    }

    /// Reads `directory`. Taking a work directory's lock tells whether its owner runs; the lock
    /// is let go at once (the servers' own sweep is what must remove it).
    public static func read(_ directory: String, now: Date = Date()) -> SnapshotDirectoryAudit {
        let fm = FileManager.default
        var audit = SnapshotDirectoryAudit(published: [], abandoned: [], locked: 0, now: now)
        for name in ((try? fm.contentsOfDirectory(atPath: directory)) ?? []).sorted() {
            let path = directory + "/" + name
            if name.hasPrefix("work-") {
                if isAbandoned(path) { audit.abandoned.append(name) } else { audit.locked += 1 }
            } else if let modified = (try? fm.attributesOfItem(atPath: path))?[.modificationDate] as? Date,
                let file = Published(name: name, modified: modified)
            {
                audit.published.append(file)
            }
        }
        return audit
    }

    /// The names of `directory`'s work directories that nobody holds now.
    public static func abandonedWorkDirectories(in directory: String) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []).filter { name in
            name.hasPrefix("work-") && isAbandoned(directory + "/" + name)
        }.sorted()
    }

    /// Removes every published file and its gzip copy, as a cleaner of the temporary directory
    /// would; returns how many files it removed.
    public static func removePublished(in directory: String) -> Int {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        return names.filter { $0.hasPrefix("snapshot-") && ($0.hasSuffix(".sqlite") || $0.hasSuffix(".sqlite.gz")) }.filter { name in
            (try? FileManager.default.removeItem(atPath: directory + "/" + name)) != nil
        }.count
    }

    private static func isAbandoned(_ workDirectory: String) -> Bool {
        let lock = open(workDirectory + "/lock", O_RDWR | O_CLOEXEC)
        guard lock >= 0 else { return false }  // being removed, or not the server's
        defer { close(lock) }
        guard flock(lock, LOCK_EX | LOCK_NB) == 0 else { return false }
        flock(lock, LOCK_UN)
        return true
    }
}
