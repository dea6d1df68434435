import CoreMetrics
import Foundation
import Prometheus
import RevsyncWire

/// The server's metrics, recorded with swift-metrics into its own Prometheus registry
/// (one per application, so tests can run several servers in one process).
public struct ServerMetrics: Sendable {
    public let registry: PrometheusCollectorRegistry
    let factory: PrometheusMetricsFactory
    private let head: CoreMetrics.Gauge
    /// The schema's entity names: the only `entity` labels, so a client naming made-up
    /// entities cannot grow `/metrics` (anything else is counted as `unknown`).
    private let entities: Set<String>

    public init(entities: Set<String> = []) {
        self.entities = entities
        registry = PrometheusCollectorRegistry()
        var factory = PrometheusMetricsFactory(registry: registry)
        let fine: [Duration] = [
            .microseconds(250), .microseconds(500), .milliseconds(1), .milliseconds(2), .milliseconds(5), .milliseconds(10),
            .milliseconds(25), .milliseconds(50), .milliseconds(100), .milliseconds(250), .milliseconds(500), .seconds(1), .seconds(5),
        ]
        factory.defaultDurationHistogramBuckets = fine
        self.factory = factory
        head = CoreMetrics.Gauge(label: "revsync_head_revision", dimensions: [], factory: factory)
    }

    func recordRequest(route: String, status: Int, duration: Duration) {
        CoreMetrics.Counter(label: "revsync_http_requests_total", dimensions: [("route", route), ("status", String(status))], factory: factory).increment()
        CoreMetrics.Timer(label: "revsync_http_request_duration_seconds", dimensions: [("route", route)], factory: factory).recordNanoseconds(duration.nanoseconds)
    }

    func recordApply(_ outcome: ApplyOutcome, changeSet: ChangeSet, duration: Duration) {
        switch outcome {
        case .applied(let revision, _, _):
            for entity in changeSet.types {
                CoreMetrics.Counter(label: "revsync_change_sets_applied_total", dimensions: [("entity", label(entity))], factory: factory).increment()
            }
            CoreMetrics.Timer(label: "revsync_apply_duration_seconds", dimensions: [], factory: factory).recordNanoseconds(duration.nanoseconds)
            observeHead(revision)
        case .rejected(let reason, _):
            CoreMetrics.Counter(
                label: "revsync_change_sets_rejected_total",
                dimensions: [("reason", reason.code.rawValue), ("entity", reason.entity.map(label) ?? "")], factory: factory
            ).increment()
        case .repeated, .repeatedRejection:
            CoreMetrics.Counter(label: "revsync_change_sets_repeated_total", dimensions: [], factory: factory).increment()
        }
    }

    /// `entity` if the schema has it, else `unknown`.
    func label(_ entity: String) -> String { entities.contains(entity) ? entity : "unknown" }

    func recordCatchUp(changeSets: Int, source: String, duration: Duration) {
        CoreMetrics.Timer(label: "revsync_catchup_duration_seconds", dimensions: [("source", source)], factory: factory).recordNanoseconds(duration.nanoseconds)
        CoreMetrics.Counter(label: "revsync_catchup_change_sets_total", dimensions: [], factory: factory).increment(by: changeSets)
    }

    /// Cache events: "hits" and "misses" count change sets, "backfills" PostgreSQL reads that filled holes,
    /// "errors" failed Redis calls, "writes" change sets written through.
    /// A batch's transaction run again after PostgreSQL broke a deadlock or refused to serialize it.
    func recordBatchRetry(reason: String) {
        CoreMetrics.Counter(label: "revsync_batch_retries_total", dimensions: [("reason", reason)], factory: factory).increment()
    }

    func recordCache(_ event: String, count: Int = 1) {
        guard count > 0 else { return }
        CoreMetrics.Counter(label: "revsync_cache_\(event)_total", dimensions: [], factory: factory).increment(by: count)
    }

    func cacheUp(_ up: Bool) {
        CoreMetrics.Gauge(label: "revsync_cache_up", dimensions: [], factory: factory).record(up ? 1 : 0)
    }

    /// Requests waiting for a commit (long-poll) now.
    func recordWaiting(_ count: Int) {
        CoreMetrics.Gauge(label: "revsync_sync_waiting", dimensions: [], factory: factory).record(count)
    }

    /// How a wait ended: `committed` (a wake-up), `timed_out` or `released` (shutdown, or the client left).
    func recordWaitEnded(_ ending: CommitWaiters.Ending) {
        let reason = switch ending {
        case .committed: "committed"
        case .timedOut: "timed_out"
        case .released: "released"
        }
        CoreMetrics.Counter(label: "revsync_sync_wakeups_total", dimensions: [("reason", reason)], factory: factory).increment()
    }

    /// From the wake-up of a waiting request to its answer being ready.
    func recordWakeToAnswer(_ duration: Duration) {
        CoreMetrics.Timer(label: "revsync_sync_wake_to_answer_seconds", dimensions: [], factory: factory).recordNanoseconds(duration.nanoseconds)
    }

    func observeHead(_ revision: Int64) {
        head.record(revision)
    }

    /// The Prometheus text exposition.
    public func exposition() -> String { registry.emitToString() }
}

extension Duration {
    var nanoseconds: Int64 {
        let (seconds, attoseconds) = components
        return seconds * 1_000_000_000 + attoseconds / 1_000_000_000
    }
}
