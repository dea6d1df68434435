import Hummingbird

/// Answers `503 unavailable` with `Retry-After` once `limit` requests are being handled
/// at once, so a burst queues at the clients instead of in the server's memory.
struct InFlightLimitMiddleware<Context: RequestContext>: RouterMiddleware {
    let limit: Int
    let count: BoundedCount

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard count.enter(limit: limit) else {
            throw SyncError(.unavailable, "the server is handling \(limit) requests already: retry shortly", retryAfterSeconds: 1)
        }
        defer { count.leave() }
        return try await next(request, context)
    }
}
