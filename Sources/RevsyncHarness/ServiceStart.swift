import ServiceLifecycle
import Synchronization

/// Whether a service has begun its work, for callers that must not use it before.
///
/// For PostgreSQL's client: PostgresNIO logs a warning ("Trying to lease connection from
/// `PostgresClient`, but `PostgresClient.run()` hasn't been called yet") for every lease made
/// before its `run()`, and a caller that starts the client in a task beside it and queries at
/// once usually makes one. `revsync migrate` and `revsync restored` printed it on every run, and
/// a test run logged it 181 times. The lease itself waits for `run()`, so nothing failed: the
/// warning only taught operators to ignore warnings.
public final class ServiceStart: Sendable {
    private let begun = Atomic<Bool>(false)

    public init() {}

    /// Called by the service right before it begins its work.
    public func announce() { begun.store(true, ordering: .releasing) }

    public var hasBegun: Bool { begun.load(ordering: .acquiring) }

    /// Returns once the service announced its start; throws if cancelled first. A poll, not a
    /// continuation: it runs once per start, and the millisecond it may add lets the announcing
    /// task go on into the `run()` it announced.
    public func wait() async throws {
        while !hasBegun { try await Task.sleep(for: .milliseconds(1)) }
    }
}

/// A service that announces when it begins its work (`ServiceStart`); `withRunning` waits for
/// that before its body.
public protocol AnnouncesStart: Service {
    var start: ServiceStart { get }
}
