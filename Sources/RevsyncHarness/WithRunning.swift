import Logging
import ServiceLifecycle

/// Runs `body` while `service` (a `PostgresClient`, an application, …) runs beside it in a
/// child task, and shuts the service down gracefully when `body` returns or throws: the
/// service is cancelled only if it is still running `gracePeriod` later.
///
/// Gracefully, not by cancelling, because a cancelled Hummingbird server can drop a connection
/// it has accepted but not yet served, and SwiftNIO traps on that ("Deinited NIOAsyncWriter
/// without calling finish()", apple/swift-nio#3481); it took down a whole test run in CI.
/// A graceful shutdown serves or closes every accepted connection first.
///
/// A service that announces its start (`AnnouncesStart`: PostgreSQL's client through
/// `BoundedStop`) has begun before `body` runs.
///
/// An error the service throws is not reported: `body` sees its effects (e.g. a server that
/// never listens) and fails on its own.
public nonisolated(nonsending) func withRunning<Result>(
    _ service: some Service,
    gracePeriod: Duration = .seconds(10),
    _ body: () async throws -> Result
) async throws -> Result {
    var configuration = ServiceGroupConfiguration(
        services: [.init(service: service)],
        logger: Logger(label: "revsync.harness.with-running", factory: { _ in SwiftLogNoOpLogHandler() })
    )
    configuration.maximumGracefulShutdownDuration = gracePeriod
    let group = ServiceGroup(configuration: configuration)
    let start = (service as? any AnnouncesStart)?.start
    return try await withThrowingTaskGroup(of: Void.self) { tasks in
        tasks.addTask {
            try? await group.run()
            // A service that ended without beginning (its group failed) lets the body run and fail on its own.
            start?.announce()
        }
        try? await start?.wait()
        let result: Swift.Result<Result, any Error>
        do { result = .success(try await body()) } catch { result = .failure(error) }
        await group.triggerGracefulShutdown()
        try? await tasks.waitForAll()
        return try result.get()
    }
}
