import ServiceLifecycle

/// Runs beside the server so that a build under way stops with it, the snapshot directory is
/// swept while it runs (`SnapshotFiles.sweep`), and the instance's work directory (its JSON
/// spools and scratch files) and own snapshot directory go when it stops.
struct SnapshotFilesService: Service {
    let files: SnapshotFiles

    func run() async throws {
        await files.removeAbandonedSiblings(prefix: SnapshotFiles.ownDirectoryPrefix)
        // Both ways out matter: graceful shutdown, and plain cancellation (a cancelled sleep returns at once).
        while !Task.isShuttingDownGracefully && !Task.isCancelled {
            await files.sweep()
            try? await cancelWhenGracefulShutdown { try await Task.sleep(for: files.policy.sweepInterval) }
        }
        await files.shutdown()
    }
}
