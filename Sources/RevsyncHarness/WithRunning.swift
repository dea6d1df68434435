import ServiceLifecycle

/// Runs `body` while `service` (a `PostgresClient`, an application, …) runs beside it in a
/// child task, and cancels the service when `body` returns or throws.
///
/// An error the service throws is not reported: `body` sees its effects (e.g. a server that
/// never listens) and fails on its own.
public nonisolated(nonsending) func withRunning<Result>(
    _ service: some Service, _ body: () async throws -> Result
) async throws -> Result {
    try await withThrowingTaskGroup(of: Void.self) { group in
        group.addTask { try await service.run() }
        defer { group.cancelAll() }
        return try await body()
    }
}
