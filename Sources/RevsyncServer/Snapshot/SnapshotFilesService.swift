import ServiceLifecycle

/// Runs beside the server so that a build under way stops with it, and the instance's
/// own snapshot directory and JSON spools go when it stops.
struct SnapshotFilesService: Service {
    let files: SnapshotFiles
    let spool: SnapshotSpool

    func run() async throws {
        spool.removeLeftovers()
        await files.removeAbandonedSiblings(prefix: SnapshotFiles.ownDirectoryPrefix)
        // Cancellation (the group ending) counts as shutdown too.
        try? await gracefulShutdown()
        await files.shutdown()
        spool.removeLeftovers()
    }
}
