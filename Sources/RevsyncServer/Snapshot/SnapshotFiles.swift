import Foundation
import Logging
import NIOPosix
import RevsyncRules

/// The snapshot file this instance serves, and its rebuilds.
///
/// The first request waits for the first build; later ones get the current file
/// at once. Once the head has moved `rebuildRevisions` past the file, or the file
/// is older than `maxAge` and the head has moved at all, the next request starts
/// a rebuild in the background and is served the current file meanwhile.
/// Concurrent requests share one build. A file replaced by a newer one is deleted
/// `retiredFor` after the newer one was published, so that a resumed download (`If-Range`)
/// still finds it (one in progress holds the file open and needs no name): by every instance
/// sharing the directory, when it adopts a file and every `sweepInterval`
/// (`SnapshotDirectorySweep`), so that what a killed instance left is removed too.
actor SnapshotFiles {
    struct Policy: Sendable {
        var rebuildRevisions: Int64
        var maxAge: Duration
        /// How long a replaced file stays for downloads that started on it.
        var retiredFor: Duration = .seconds(600)
        /// How often the directory is swept besides when a file is adopted.
        var sweepInterval: Duration { .seconds(min(60, max(1, retiredFor.seconds / 2))) }
        /// How often the head is read to decide on a rebuild (requests in between use the last reading).
        var headCheckInterval: Duration = .seconds(1)
    }

    private let catalog: SnapshotFileCatalog
    /// Where this instance's builds write their scratch files (and its JSON spools go).
    nonisolated let work: SnapshotWorkDirectory
    private let builder: SnapshotFileBuilder
    let policy: Policy
    private let head: @Sendable () async throws -> Int64
    /// The database's history id (`revsync_head.history`): files of other databases, and of
    /// revisions a database that went back numbers again, are never served.
    private let history: @Sendable () async throws -> String
    private var database: String?
    private let logger: Logger
    private let removeDirectoryAtEnd: Bool

    private var current: SnapshotFileCatalog.File?
    private var builtAt: ContinuousClock.Instant?
    private var building: Task<SnapshotFileCatalog.File, any Error>?
    /// Counts the builds started: a build that fails after the history id changed (and another
    /// build started) must not forget that one.
    private var buildsStarted = 0
    private var lastHead: (value: Int64, at: ContinuousClock.Instant)?
    /// Builds finished, for tests and metrics.
    private(set) var builds = 0

    init(
        directory: String, removeDirectoryAtEnd: Bool, builder: SnapshotFileBuilder, policy: Policy,
        head: @escaping @Sendable () async throws -> Int64, history: @escaping @Sendable () async throws -> String, logger: Logger
    ) {
        self.history = history
        self.catalog = SnapshotFileCatalog(directory: directory)
        self.work = SnapshotWorkDirectory(parent: directory)
        self.removeDirectoryAtEnd = removeDirectoryAtEnd
        self.builder = builder
        self.policy = policy
        self.head = head
        self.logger = logger
    }

    var directory: String { catalog.directory }

    /// The name of an instance's own directory under the system's temporary directory starts
    /// with this, then its process id.
    static let ownDirectoryPrefix = "revsync-snapshots-"

    /// The file to serve now.
    func file() async throws -> SnapshotFileCatalog.File {
        if let current, !current.isOnDisk {
            // Removed under this instance: another one sharing the directory retired it while
            // this one still served it, or a cleaner of the temporary directory took it. It is
            // forgotten, and the request waits for a file that exists, as the first one does
            // (it answered 404 before, until the head moved).
            logger.notice("the snapshot file served is gone from its directory: finding or building another", metadata: ["file": "\(current.name)"])
            self.current = nil
        }
        if current == nil, building == nil, let found = try await prepare() { adopt(found) }
        guard let current else { return try await startBuild().value }
        // A head that cannot be read (PostgreSQL or Redis down) leaves the file served as it is.
        if building == nil, (try? await isStale(current)) == true { _ = startBuild() }
        // Ahead of the database (restored from a backup): its records are not the database's, and a
        // device that loaded it would hold revisions the server never gave. The rebuild is waited for.
        if let head = lastHead?.value, current.revision > head, let building {
            logger.notice("the snapshot file is ahead of the database's head: waiting for its rebuild", metadata: [
                "revision": "\(current.revision)", "head": "\(head)",
            ])
            return try await building.value
        }
        return current
    }

    /// The database's history id changed (`HistoryWatch`): the file served is of the old line of
    /// revisions. The next request finds or builds one of the new.
    func historyChanged(to history: String) {
        database = SnapshotFileCatalog.databaseName(history)
        current = nil
        lastHead = nil
        // A build under way may have read the old id: it is left to finish, its file unserved
        // (`adopt`), and the next request starts a build of its own.
        building = nil
    }

    /// Removes the replaced files whose time is up and the work directories of instances that are
    /// gone (`SnapshotDirectorySweep`, `SnapshotWorkDirectory.removeAbandoned`).
    func sweep() {
        let removed = catalog.sweep(keepReplaced: policy.retiredFor)
        let abandoned = SnapshotWorkDirectory.removeAbandoned(in: catalog.directory, keeping: work)
        if !removed.isEmpty || abandoned > 0 {
            logger.info("snapshot directory swept", metadata: ["files": "\(removed.count)", "workDirectories": "\(abandoned)"])
        }
    }

    /// Builds a new file now (whatever the policy) and returns it once it serves.
    @discardableResult
    func rebuild() async throws -> SnapshotFileCatalog.File {
        if let building { _ = try? await building.value }
        return try await startBuild().value
    }

    /// For a directory of the instance's own: removes the ones that instances which are gone
    /// (killed, so they could not remove theirs) left beside it, `<prefix><pid>-…` with no such process.
    func removeAbandonedSiblings(prefix: String) {
        guard removeDirectoryAtEnd else { return }
        let parent = (catalog.directory as NSString).deletingLastPathComponent
        for name in (try? FileManager.default.contentsOfDirectory(atPath: parent)) ?? [] where name.hasPrefix(prefix) {
            guard let pid = name.dropFirst(prefix.count).split(separator: "-").first.flatMap({ Int32($0) }),
                parent + "/" + name != catalog.directory, kill(pid, 0) != 0, errno == ESRCH
            else { continue }
            try? FileManager.default.removeItem(atPath: parent + "/" + name)
        }
    }

    /// Stops a build under way, removes the work directory and, for a directory of the
    /// instance's own, the directory.
    func shutdown() async {
        building?.cancel()
        _ = try? await building?.value
        work.remove()
        if removeDirectoryAtEnd { try? FileManager.default.removeItem(atPath: catalog.directory) }
    }

    /// Creates the directory and looks for a file of this database another instance (or an
    /// earlier run) left.
    private func prepare() async throws -> SnapshotFileCatalog.File? {
        try? FileManager.default.createDirectory(atPath: catalog.directory, withIntermediateDirectories: true)
        let database: String
        if let known = self.database {
            database = known
        } else {
            database = SnapshotFileCatalog.databaseName(try await history())
            self.database = database
        }
        return catalog.newest(database: database, schemaVersion: builder.schema.version)
    }

    private func isStale(_ file: SnapshotFileCatalog.File) async throws -> Bool {
        let now = ContinuousClock.now
        let head: Int64
        if let lastHead, now - lastHead.at < policy.headCheckInterval {
            head = lastHead.value
        } else {
            head = try await self.head()
            lastHead = (head, now)
        }
        // Behind the file: the database went back (restored from a backup): the file is not its state.
        if head < file.revision { return true }
        guard head > file.revision else { return false }
        if head - file.revision >= policy.rebuildRevisions { return true }
        guard let builtAt else { return true }
        return now - builtAt >= policy.maxAge
    }

    private func startBuild() -> Task<SnapshotFileCatalog.File, any Error> {
        if let building { return building }
        buildsStarted += 1
        let catalog = self.catalog, builder = self.builder, logger = self.logger, work = self.work, number = buildsStarted
        // Detached: the build reads and writes for seconds; the actor only records its outcome.
        let task: Task<SnapshotFileCatalog.File, any Error> = Task.detached {
            let started = ContinuousClock.now
            var scratch: String?
            do {
                let path = try catalog.scratchPath(in: work)
                scratch = path
                let version = builder.schema.version
                let outcome = try await builder.build(at: path) { database, head in
                    catalog.files(database: database, schemaVersion: version).first { $0.revision == head }
                }
                switch outcome {
                case .found(let file):
                    await self.adopt(file)
                    return file
                case .built(let meta, let database):
                    // Seconds of hashing and compressing at a million records: on NIO's blocking
                    // pool, not on one of the few threads every request's task runs on.
                    let file = try await NIOThreadPool.singleton.runIfActive {
                        try catalog.publish(scratch: path, database: database, revision: meta.revision, schemaVersion: meta.schemaVersion)
                    }
                    logger.info("snapshot file built", metadata: [
                        "revision": "\(file.revision)", "records": "\(meta.records)", "bytes": "\(file.size)",
                        "gzipBytes": "\(file.gzipSize ?? 0)", "seconds": "\((ContinuousClock.now - started).seconds)",
                    ])
                    await self.adopt(file, built: true)
                    return file
                }
            } catch {
                if let scratch { try? FileManager.default.removeItem(atPath: scratch) }
                logger.warning("snapshot file build failed", metadata: ["error": "\(error)"])
                await self.buildFailed(number)
                throw error
            }
        }
        building = task
        return task
    }

    private func buildFailed(_ number: Int) {
        if number == buildsStarted { building = nil }
    }

    /// Makes `file` the one served; a build that produced or found it has ended.
    private func adopt(_ file: SnapshotFileCatalog.File, built: Bool = false) {
        if built { builds += 1 }
        // A build that began before the history id changed: its file is of the old line.
        if let database, file.database != database { return }
        building = nil
        if current != file {
            current = file
            builtAt = ContinuousClock.now
        }
        sweep()
    }
}
