import Hummingbird

/// Counts every request by route and status, and turns unexpected errors into the
/// contract's JSON 500 (the details go to the log, with the request id).
struct ObservationMiddleware<Context: RequestContext>: RouterMiddleware {
    let metrics: ServerMetrics

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let started = ContinuousClock.now
        let route = context.endpointPath ?? "unmatched"
        do {
            let response = try await next(request, context)
            metrics.recordRequest(route: route, status: response.status.code, duration: ContinuousClock.now - started)
            return response
        } catch let error as any HTTPResponseError {
            metrics.recordRequest(route: route, status: error.status.code, duration: ContinuousClock.now - started)
            if error.status.code >= 500 { context.logger.warning("request failed", metadata: ["error": "\(error)"]) }
            throw error
        } catch {
            metrics.recordRequest(route: route, status: 500, duration: ContinuousClock.now - started)
            context.logger.error("request failed", metadata: ["error": "\(String(reflecting: error))"])
            throw SyncError(.internal, "the server failed to handle this request; its log has the details under request id \(context.id)")
        }
    }
}
