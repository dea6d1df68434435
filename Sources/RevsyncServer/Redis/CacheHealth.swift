import Logging
import RevsyncRedis
import Synchronization

/// Whether to try Redis at all. After a failure the cache is skipped, so a Redis outage
/// costs requests nothing but the PostgreSQL path: requests use it only while it is up
/// (`isUp`). The instance's own background reads (the reconciler's, the device-change
/// watcher's) probe it once a pause has passed (`mayTry()`), one at a time, and the first
/// that succeeds brings it back for everyone.
///
/// Requests do not probe: a Redis cut off without its connections closing (a network
/// partition) fails each call only at the command timeout, two seconds, and when every call
/// after the pause tried it, the instance's requests were held up for two seconds in every
/// three of a partition.
final class CacheHealth: Sendable {
    private struct State {
        var down = false
        var retryAt: ContinuousClock.Instant? = nil
    }

    private let state = Mutex(State())
    private let pause: Duration
    private let logger: Logger
    private let metrics: ServerMetrics

    init(pause: Duration = .seconds(1), logger: Logger, metrics: ServerMetrics) {
        self.pause = pause
        self.logger = logger
        self.metrics = metrics
        metrics.cacheUp(true)
    }

    /// Whether Redis is taken to work: no failure since the last success.
    var isUp: Bool { state.withLock { $0.retryAt == nil } }

    /// Whether a background read may use Redis: always while it works; while it is down, the
    /// first call after each pause (the probe, whose `succeeded()` or `failed(_:)` says how it went).
    func mayTry() -> Bool {
        state.withLock { state in
            guard let retryAt = state.retryAt else { return true }
            let now = ContinuousClock.now
            guard now >= retryAt else { return false }
            // The calls after the probe skip Redis until it succeeds, or for another pause
            // (a probe that never reports, cancelled, does not keep Redis skipped for good).
            state.retryAt = now + pause
            return true
        }
    }

    func succeeded() {
        let recovered = state.withLock { state in
            defer { state = State() }
            return state.down
        }
        if recovered {
            logger.notice("Redis cache is back; catch-up is served from it again")
            metrics.cacheUp(true)
        }
    }

    func failed(_ error: any Error) {
        metrics.recordCache("errors")
        let pause = self.pause
        let wentDown = state.withLock { state in
            defer {
                state.down = true
                state.retryAt = ContinuousClock.now + pause
            }
            return !state.down
        }
        if wentDown {
            logger.warning("Redis cache unavailable; serving from PostgreSQL (degraded)", metadata: ["error": "\(error)"])
            metrics.cacheUp(false)
        }
    }
}
