import Foundation
import Logging
import RevsyncRules

/// The snapshot file this instance serves, and its rebuilds.
///
/// The first request waits for the first build; later ones get the current file
/// at once. Once the head has moved `rebuildRevisions` past the file, or the file
/// is older than `maxAge` and the head has moved at all, the next request starts
/// a rebuild in the background and is served the current file meanwhile.
/// Concurrent requests share one build. A file replaced by a newer one is deleted
/// after `retiredFor`, so that a download in progress (which holds the file open)
/// and a resumed one (`If-Range`) still find it.
actor SnapshotFiles {
    struct Policy: Sendable {
        var rebuildRevisions: Int64
        var maxAge: Duration
        /// How long a replaced file stays for downloads that started on it.
        var retiredFor: Duration = .seconds(600)
        /// How often the head is read to decide on a rebuild (requests in between use the last reading).
        var headCheckInterval: Duration = .seconds(1)
    }

    private let catalog: SnapshotFileCatalog
    private let builder: SnapshotFileBuilder
    private let policy: Policy
    private let head: @Sendable () async throws -> Int64
    private let logger: Logger
    private let removeDirectoryAtEnd: Bool

    private var current: SnapshotFileCatalog.File?
    private var builtAt: ContinuousClock.Instant?
    private var building: Task<SnapshotFileCatalog.File, any Error>?
    private var retired: [(file: SnapshotFileCatalog.File, at: ContinuousClock.Instant)] = []
    private var lastHead: (value: Int64, at: ContinuousClock.Instant)?
    /// Builds finished, for tests and metrics.
    private(set) var builds = 0

    init(
        directory: String, removeDirectoryAtEnd: Bool, builder: SnapshotFileBuilder, policy: Policy,
        head: @escaping @Sendable () async throws -> Int64, logger: Logger
    ) {
        self.catalog = SnapshotFileCatalog(directory: directory)
        self.removeDirectoryAtEnd = removeDirectoryAtEnd
        self.builder = builder
        self.policy = policy
        self.head = head
        self.logger = logger
    }

    var directory: String { catalog.directory }

    /// The file to serve now.
    func file() async throws -> SnapshotFileCatalog.File {
        if current == nil, building == nil, let found = prepare() { adopt(found) }
        guard let current else { return try await startBuild().value }
        if building == nil, try await isStale(current) { _ = startBuild() }
        return current
    }

    /// Builds a new file now (whatever the policy) and returns it once it serves.
    @discardableResult
    func rebuild() async throws -> SnapshotFileCatalog.File {
        if let building { _ = try? await building.value }
        return try await startBuild().value
    }

    /// Stops a build under way and, for a directory of the instance's own, removes it.
    func shutdown() async {
        building?.cancel()
        _ = try? await building?.value
        if removeDirectoryAtEnd { try? FileManager.default.removeItem(atPath: catalog.directory) }
    }

    /// Creates the directory and looks for a file another instance (or an earlier run) left.
    private func prepare() -> SnapshotFileCatalog.File? {
        try? FileManager.default.createDirectory(atPath: catalog.directory, withIntermediateDirectories: true)
        return catalog.newest(schemaVersion: builder.schema.version)
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
        guard head > file.revision else { return false }
        if head - file.revision >= policy.rebuildRevisions { return true }
        guard let builtAt else { return true }
        return now - builtAt >= policy.maxAge
    }

    private func startBuild() -> Task<SnapshotFileCatalog.File, any Error> {
        if let building { return building }
        let catalog = self.catalog, builder = self.builder, logger = self.logger
        // Detached: digesting and compressing a large file must not hold the actor up.
        let task: Task<SnapshotFileCatalog.File, any Error> = Task.detached {
            let started = ContinuousClock.now
            let scratch = catalog.scratchPath()
            do {
                let version = builder.schema.version
                let outcome = try await builder.build(at: scratch) { head in
                    catalog.newest(schemaVersion: version).flatMap { $0.revision >= head ? $0 : nil }
                }
                switch outcome {
                case .found(let file):
                    await self.adopt(file)
                    return file
                case .built(let meta):
                    let file = try catalog.publish(scratch: scratch, revision: meta.revision, schemaVersion: meta.schemaVersion)
                    logger.info("snapshot file built", metadata: [
                        "revision": "\(file.revision)", "records": "\(meta.records)", "bytes": "\(file.size)",
                        "gzipBytes": "\(file.gzipSize ?? 0)", "seconds": "\((ContinuousClock.now - started).seconds)",
                    ])
                    await self.adopt(file, built: true)
                    return file
                }
            } catch {
                try? FileManager.default.removeItem(atPath: scratch)
                logger.warning("snapshot file build failed", metadata: ["error": "\(error)"])
                await self.buildEnded()
                throw error
            }
        }
        building = task
        return task
    }

    private func buildEnded() {
        building = nil
    }

    /// Makes `file` the one served; a build that produced or found it has ended.
    private func adopt(_ file: SnapshotFileCatalog.File, built: Bool = false) {
        building = nil
        if built { builds += 1 }
        let now = ContinuousClock.now
        if let current, current != file { retired.append((current, now)) }
        if current != file {
            current = file
            builtAt = now
        }
        let keep = retired.filter { now - $0.at < policy.retiredFor }
        for old in retired where now - old.at >= policy.retiredFor && old.file != current { catalog.remove(old.file) }
        retired = keep
    }
}
