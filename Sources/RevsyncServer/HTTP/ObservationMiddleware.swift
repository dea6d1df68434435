import Hummingbird
import NIOCore
import NIOHTTP1
import RevsyncRules

/// Counts every request by route and status, and turns errors that are not the contract's
/// into its JSON bodies: the rules' refusals and the stores' failures into theirs, an unknown route into `404 not_found`, a request cut short by its
/// client into `400 invalid_request`, and anything unexpected into a 500 (the details go to
/// the log, with the request id). A request that waits for a commit (long-poll) held by its
/// connection (`ParkedSyncHandler`) is counted when its answer is written, with its status
/// (`HeldRequestRecord`): its duration is the server's work up to the wait, and
/// `revsync_sync_wake_to_answer_seconds` times the answer after it.
struct ObservationMiddleware: RouterMiddleware {
    typealias Context = RevsyncRequestContext
    let metrics: ServerMetrics

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let started = ContinuousClock.now
        let route = context.endpointPath ?? "unmatched"
        let elapsed = { ContinuousClock.now - started }
        do {
            do {
                let response = try await next(request, context)
                if context.held.isHeld {
                    context.held.routeReturned(route: route, duration: elapsed(), metrics: metrics)
                } else {
                    metrics.recordRequest(route: route, status: response.status.code, duration: elapsed())
                }
                return response
            } catch let refusal as SyncRefusal {
                throw SyncError(refusal)
            } catch let error as StoreError {
                throw SyncError(error)
            }
        } catch let error as SyncError {
            metrics.recordRequest(route: route, status: error.status.code, duration: elapsed())
            if error.status.code >= 500 { context.logger.warning("request failed", metadata: ["error": "\(error)"]) }
            throw error
        } catch let error as HTTPError where error.status == .notFound || error.status == .methodNotAllowed {
            metrics.recordRequest(route: route, status: 404, duration: elapsed())
            throw SyncError(.notFound, "no endpoint answers \(request.method) \(request.uri.path): GET /openapi.json lists them")
        } catch let error as any HTTPResponseError {
            metrics.recordRequest(route: route, status: error.status.code, duration: elapsed())
            if error.status.code >= 500 { context.logger.warning("request failed", metadata: ["error": "\(error)"]) }
            throw error
        } catch let error where Self.cutShort(error) {
            // The client stopped sending (or its body timed out): nobody reads the answer, and it is not the server's fault.
            metrics.recordRequest(route: route, status: 400, duration: elapsed())
            context.logger.debug("request cut short by its client", metadata: ["error": "\(error)"])
            throw SyncError(.invalidRequest, "the request ended before its body was complete")
        } catch {
            metrics.recordRequest(route: route, status: 500, duration: elapsed())
            context.logger.error("request failed", metadata: ["error": "\(String(reflecting: error))"])
            throw SyncError(.internal, "the server failed to handle this request; its log has the details under request id \(context.id)")
        }
    }

    /// A body that ended early or a connection the client closed.
    static func cutShort(_ error: any Error) -> Bool {
        error is HTTPParserError || error is ChannelError
    }
}
