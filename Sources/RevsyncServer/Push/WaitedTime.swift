import Synchronization

/// The time a request spent waiting for a commit (long-poll): its recorded latency leaves it
/// out, so `revsync_http_request_duration_seconds` keeps measuring the server's work.
final class WaitedTime: Sendable {
    private let nanoseconds = Atomic<Int64>(0)

    /// Set by `ObservationMiddleware` for the request its task handles.
    @TaskLocal static var current: WaitedTime?

    func add(_ duration: Duration) { nanoseconds.add(duration.nanoseconds, ordering: .relaxed) }

    var total: Duration { .nanoseconds(nanoseconds.load(ordering: .relaxed)) }
}
