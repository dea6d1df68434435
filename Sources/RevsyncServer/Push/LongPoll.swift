import Logging

/// What a `/sync` request that may wait (long-poll) needs from its instance.
package struct LongPoll: Sendable {
    package let waiters: CommitWaiters
    /// The longest wait granted; longer ones are cut to it, and zero turns waiting off.
    package let maxWait: Duration
    /// The instance's count of requests in flight: a waiting request gives its place up, since
    /// it holds nothing the limit protects (no connection lease, no buffer, no CPU).
    let inFlight: BoundedCount?
    let shared = SharedCatchUp()
    let woken: WokenSyncs

    package init(waiters: CommitWaiters, maxWait: Duration, logger: Logger) {
        self.init(waiters: waiters, maxWait: maxWait, inFlight: nil, logger: logger)
    }

    init(waiters: CommitWaiters, maxWait: Duration, inFlight: BoundedCount?, logger: Logger) {
        self.waiters = waiters
        self.maxWait = maxWait
        self.inFlight = inFlight
        self.woken = WokenSyncs(logger: logger)
    }

    /// The wait granted for a request's `wait` (seconds, already checked to be 0 or more).
    func granted(_ seconds: Double?) -> Duration? {
        guard let seconds, seconds > 0, maxWait > .zero else { return nil }
        let cap = Double(maxWait.components.seconds) + Double(maxWait.components.attoseconds) / 1e18
        return .seconds(min(seconds, cap))
    }
}

extension Device {
    /// Nobody's device: a page read for it holds every change set in its public form.
    static let nobody = Device(id: 0, publicId: "", name: "", user: "", role: "")
}
