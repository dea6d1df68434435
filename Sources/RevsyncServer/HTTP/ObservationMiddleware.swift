import Hummingbird
import NIOCore
import NIOHTTP1
import RevsyncRules

/// Caps the requests in flight and counts every request by route and status, and turns errors that are not the contract's
/// into its JSON bodies: the rules' refusals and the stores' failures into theirs, an unknown path into `404 not_found` (a path
/// served under other methods into `405 method_not_allowed` with `Allow`, `RouteMethods`), a request cut short by its
/// client into `400 invalid_request`, and anything unexpected into a 500 (the details go to
/// the log, with the request id). A request that waits for a commit (long-poll) held by its
/// connection (`ParkedSyncHandler`) is counted when its answer is written, with its status
/// (`HeldRequestRecord`): its duration is the server's work up to the wait, and
/// `revsync_sync_wake_to_answer_seconds` times the answer after it.
///
/// Past `maxInFlight` requests being handled at once it answers `503 unavailable` with
/// `Retry-After`, so a burst queues at the clients instead of in the server's memory. The cap
/// is here rather than in a middleware of its own: each middleware is another level of frames
/// on every connection's task, which keeps them for as long as the connection lives.
struct ObservationMiddleware: RouterMiddleware {
    typealias Context = RevsyncRequestContext
    let metrics: ServerMetrics
    let maxInFlight: Int
    let inFlight: BoundedCount
    let routes: KnownRoutes

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let started = ContinuousClock.now
        do {
            try enter()
            defer { inFlight.leave() }
            let response = try await next(request, context)
            recordAnswered(response.status.code, context: context, started: started)
            return response
        } catch {
            throw answerFailed(error, request: request, context: context, started: started)
        }
    }

    // The work around the route is synchronous and kept out of `handle`: an async function's
    // frame lives on its task's allocator, which keeps its high-water mark for the
    // connection's lifetime, so every byte here would be held by each waiting request.

    @inline(never)
    private func enter() throws {
        guard inFlight.enter(limit: maxInFlight) else {
            throw SyncError(.unavailable, "the server is handling \(maxInFlight) requests already: retry shortly", retryAfterSeconds: 1)
        }
    }

    @inline(never)
    private func recordAnswered(_ status: Int, context: Context, started: ContinuousClock.Instant) {
        let route = context.endpointPath ?? "unmatched"
        if context.held.isHeld {
            context.held.routeReturned(route: route, duration: ContinuousClock.now - started, metrics: metrics)
        } else {
            metrics.recordRequest(route: route, status: status, duration: ContinuousClock.now - started)
        }
    }

    /// The error to answer with, counted and logged.
    @inline(never)
    private func answerFailed(_ error: any Error, request: Request, context: Context, started: ContinuousClock.Instant) -> any Error {
        let route = context.endpointPath ?? "unmatched"
        let elapsed = { ContinuousClock.now - started }
        let error: any Error =
            if let refusal = error as? SyncRefusal { SyncError(refusal) } else if let failure = error as? StoreError { SyncError(failure) } else { error }
        switch error {
        case let error as SyncError:
            metrics.recordRequest(route: route, status: error.status.code, duration: elapsed())
            if error.status.code >= 500 { context.logger.warning("request failed", metadata: ["error": "\(error)"]) }
            return error
        case let error as HTTPError where error.status == .notFound || error.status == .methodNotAllowed:
            return unrouted(request, route: route, elapsed: elapsed())
        case let error as any HTTPResponseError:
            metrics.recordRequest(route: route, status: error.status.code, duration: elapsed())
            if error.status.code >= 500 { context.logger.warning("request failed", metadata: ["error": "\(error)"]) }
            return error
        case let error where Self.cutShort(error):
            // The client stopped sending (or its body timed out): nobody reads the answer, and it is not the server's fault.
            metrics.recordRequest(route: route, status: 400, duration: elapsed())
            context.logger.debug("request cut short by its client", metadata: ["error": "\(error)"])
            return SyncError(.invalidRequest, "the request ended before its body was complete")
        default:
            metrics.recordRequest(route: route, status: 500, duration: elapsed())
            context.logger.error("request failed", metadata: ["error": "\(String(reflecting: error))"])
            return SyncError(.internal, "the server failed to handle this request; its log has the details under request id \(context.id)")
        }
    }

    /// The answer to a request no route took: 405 when its path is served under other methods.
    @inline(never)
    private func unrouted(_ request: Request, route: String, elapsed: Duration) -> SyncError {
        let path = request.uri.path
        let allowed = routes.allowed(at: path)
        guard !allowed.isEmpty else {
            metrics.recordRequest(route: route, status: 404, duration: elapsed)
            return SyncError(.notFound, "no endpoint answers \(request.method) \(path): GET /openapi.json lists them")
        }
        // A route that takes this method threw the 404 itself (Hummingbird's file loading does): not a routing miss.
        guard !allowed.contains(request.method.rawValue) else {
            metrics.recordRequest(route: route, status: 404, duration: elapsed)
            return SyncError(.notFound, "\(request.method) \(path) found nothing to answer with")
        }
        metrics.recordRequest(route: route, status: 405, duration: elapsed)
        let methods = allowed.joined(separator: ", ")
        var error = SyncError(.methodNotAllowed, "\(path) does not take \(request.method): send \(methods) (GET /openapi.json lists every endpoint)")
        error.allowedMethods = allowed
        return error
    }

    /// A body that ended early or a connection the client closed.
    static func cutShort(_ error: any Error) -> Bool {
        error is HTTPParserError || error is ChannelError
    }
}
