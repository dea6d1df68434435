import Logging
import RevsyncRedis
import Synchronization

/// Whether to try Redis at all. After a failure the cache is skipped for a short
/// pause, so a Redis outage costs requests nothing but the PostgreSQL path; the
/// first call after the pause probes it again.
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

    var shouldTry: Bool {
        state.withLock { state in
            guard let retryAt = state.retryAt else { return true }
            return ContinuousClock.now >= retryAt
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
