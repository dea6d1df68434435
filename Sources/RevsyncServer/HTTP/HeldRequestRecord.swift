import Synchronization

/// The count of a `/sync` request its connection holds while it waits (`ParkedSyncHandler`):
/// `revsync_http_requests_total` counts it once its answer is written, with that answer's
/// status (an error after the wait too), and the request's duration is the server's work
/// up to the wait, as `ObservationMiddleware` measured it. A request whose client left
/// before any answer is counted as `499`, as proxies log a request the client closed.
///
/// The two halves come from two places, in either order: the middleware when the route
/// returns, the connection's handler when the answer is written or the client is gone.
final class HeldRequestRecord: Sendable {
    /// nginx's status for a request its client closed before the answer.
    static let clientClosed = 499

    private struct State {
        var held = false
        var work: (route: String, duration: Duration, metrics: ServerMetrics)?
        var status: Int?
    }

    private let state = Mutex(State())

    /// Called by the route once the connection took the request over.
    func hold() { state.withLock { $0.held = true } }

    var isHeld: Bool { state.withLock { $0.held } }

    /// The middleware's half, once the route returned.
    func routeReturned(route: String, duration: Duration, metrics: ServerMetrics) {
        settle { $0.work = (route, duration, metrics) }
    }

    /// The connection's half: the answer's status, or nil when the client left first.
    func answered(status: Int?) {
        settle { $0.status = status ?? Self.clientClosed }
    }

    private func settle(_ change: (inout State) -> Void) {
        let complete = state.withLock { state -> (route: String, duration: Duration, metrics: ServerMetrics, status: Int)? in
            change(&state)
            guard let work = state.work, let status = state.status else { return nil }
            return (work.route, work.duration, work.metrics, status)
        }
        if let complete { complete.metrics.recordRequest(route: complete.route, status: complete.status, duration: complete.duration) }
    }
}
