import CoreMetrics
import Foundation
import Prometheus
import RevsyncWire
import Synchronization

/// The server's metrics, recorded with swift-metrics into its own Prometheus registry
/// (one per application, so tests can run several servers in one process).
///
/// Every metric is made once and kept (`Handles`): making one asks the registry, which checks
/// the name and labels character by character, compares the buckets and takes its lock, and
/// that cost several times per request (a waiting device's answer records four metrics).
public struct ServerMetrics: Sendable {
    public let registry: PrometheusCollectorRegistry
    let factory: PrometheusMetricsFactory
    private let head: HighestRevision
    /// The schema's entity names: the only `entity` labels, so a client naming made-up
    /// entities cannot grow `/metrics` (anything else is counted as `unknown`).
    private let entities: Set<String>
    private let handles: Handles

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
        head = HighestRevision(CoreMetrics.Gauge(label: "revsync_head_revision", dimensions: [], factory: factory))
        handles = Handles(factory: factory)
    }

    func recordRequest(route: String, status: Int, duration: Duration) {
        handles.counter("revsync_http_requests_total", [("route", route), ("status", String(status))]).increment()
        handles.timer("revsync_http_request_duration_seconds", [("route", route)]).recordNanoseconds(duration.nanoseconds)
    }

    func recordApply(_ outcome: ApplyOutcome, changeSet: ChangeSet, duration: Duration) {
        switch outcome {
        case .applied(let revision, _, _):
            for entity in changeSet.types {
                handles.counter("revsync_change_sets_applied_total", [("entity", label(entity))]).increment()
            }
            handles.timer("revsync_apply_duration_seconds").recordNanoseconds(duration.nanoseconds)
            observeHead(revision)
        case .rejected(let reason, _):
            handles.counter("revsync_change_sets_rejected_total", [("reason", reason.code.rawValue), ("entity", reason.entity.map(label) ?? "")])
                .increment()
        case .repeated, .repeatedRejection:
            handles.counter("revsync_change_sets_repeated_total").increment()
        }
    }

    /// `entity` if the schema has it, else `unknown`.
    func label(_ entity: String) -> String { entities.contains(entity) ? entity : "unknown" }

    func recordCatchUp(changeSets: Int, source: String, duration: Duration) {
        handles.timer("revsync_catchup_duration_seconds", [("source", source)]).recordNanoseconds(duration.nanoseconds)
        handles.counter("revsync_catchup_change_sets_total").increment(by: changeSets)
    }

    /// A batch's transaction run again after PostgreSQL broke a deadlock or refused to serialize it.
    func recordBatchRetry(reason: String) {
        handles.counter("revsync_batch_retries_total", [("reason", reason)]).increment()
    }

    /// A request's connection closed because PostgreSQL left its work unanswered past the
    /// answer limit (`ConnectionLeaseWatch`): a frozen PostgreSQL, or its storage stalled.
    func recordUnansweredConnection() {
        handles.counter("revsync_postgres_unanswered_total").increment()
    }

    /// Cache events: "hits" and "misses" count change sets, "backfills" PostgreSQL reads that filled holes,
    /// "errors" failed Redis calls, "writes" change sets written through.
    func recordCache(_ event: String, count: Int = 1) {
        guard count > 0 else { return }
        handles.counter("revsync_cache_\(event)_total").increment(by: count)
    }

    func cacheUp(_ up: Bool) {
        handles.gauge("revsync_cache_up").record(up ? 1 : 0)
    }

    /// The instance's Redis subscription (commits and device changes of the other instances)
    /// started at `since`, or is down (nil): the gauge holds the Unix time of its last start, 0
    /// while it is down, so that a monitor can tell a subscription made anew from one that never ended.
    func redisSubscribed(since: Date?) {
        handles.gauge("revsync_redis_subscribed_since_seconds").record(since?.timeIntervalSince1970 ?? 0)
    }

    /// Where a `POST /sync` request ran: on a worker (`RequestWorkers`), or on its connection's
    /// task because no worker was free in time.
    func recordRequestPlacement(onWorker: Bool) {
        handles.counter("revsync_sync_request_tasks_total", [("task", onWorker ? "worker" : "connection")]).increment()
    }

    /// Requests waiting for a commit (long-poll) now.
    func recordWaiting(_ count: Int) {
        handles.gauge("revsync_sync_waiting").record(count)
    }

    /// How a wait ended: `committed` (a wake-up), `timed_out` or `released` (shutdown, or the client left).
    func recordWaitEnded(_ ending: CommitWaiters.Ending) {
        let reason = switch ending {
        case .committed: "committed"
        case .timedOut: "timed_out"
        case .released: "released"
        }
        handles.counter("revsync_sync_wakeups_total", [("reason", reason)]).increment()
    }

    /// From the wake-up of a waiting request to its answer being ready.
    func recordWakeToAnswer(_ duration: Duration) {
        handles.timer("revsync_sync_wake_to_answer_seconds").recordNanoseconds(duration.nanoseconds)
    }

    /// `revision` was committed or sent: the head gauge moves to it if it is past the highest so far.
    func observeHead(_ revision: Int64) {
        head.observe(revision)
    }

    /// The Prometheus text exposition.
    public func exposition() -> String { registry.emitToString() }
}

/// The metrics made so far, by name and labels. Every label set the server records is bounded
/// (routes, statuses, the schema's entities, rejection reasons, cache events), so this stays small.
private final class Handles: Sendable {
    private struct Key: Hashable {
        let name: String
        let labels: [String]
    }

    private let factory: PrometheusMetricsFactory
    private let counters = Mutex<[Key: CoreMetrics.Counter]>([:])
    private let timers = Mutex<[Key: CoreMetrics.Timer]>([:])
    private let gauges = Mutex<[Key: CoreMetrics.Gauge]>([:])

    init(factory: PrometheusMetricsFactory) {
        self.factory = factory
    }

    func counter(_ name: String, _ labels: [(String, String)] = []) -> CoreMetrics.Counter {
        Self.made(name, labels, in: counters) { CoreMetrics.Counter(label: name, dimensions: labels, factory: factory) }
    }

    func timer(_ name: String, _ labels: [(String, String)] = []) -> CoreMetrics.Timer {
        Self.made(name, labels, in: timers) { CoreMetrics.Timer(label: name, dimensions: labels, factory: factory) }
    }

    func gauge(_ name: String, _ labels: [(String, String)] = []) -> CoreMetrics.Gauge {
        Self.made(name, labels, in: gauges) { CoreMetrics.Gauge(label: name, dimensions: labels, factory: factory) }
    }

    /// The handle made before for these labels, or a new one, made under the lock so that
    /// two requests never make the same metric twice.
    private static func made<Handle>(
        _ name: String, _ labels: [(String, String)], in handles: borrowing Mutex<[Key: Handle]>, make: () -> Handle
    ) -> Handle {
        // Label names are fixed by the caller: their values alone tell two series apart.
        let key = Key(name: name, labels: labels.map(\.1))
        return handles.withLock { handles in
            if let handle = handles[key] { return handle }
            let handle = make()
            handles[key] = handle
            return handle
        }
    }
}

extension Duration {
    var nanoseconds: Int64 {
        let (seconds, attoseconds) = components
        return seconds * 1_000_000_000 + attoseconds / 1_000_000_000
    }
}

/// The gauge of the highest revision this instance has seen committed. Revisions are observed
/// out of order (a lagging device's catch-up page ends below the head, and requests finish in
/// any order), so the gauge is only ever raised, under a lock so two raises cannot cross.
private final class HighestRevision: Sendable {
    private let gauge: CoreMetrics.Gauge
    private let highest = Mutex<Int64>(.min)

    init(_ gauge: CoreMetrics.Gauge) { self.gauge = gauge }

    func observe(_ revision: Int64) {
        highest.withLock { highest in
            guard revision > highest else { return }
            highest = revision
            gauge.record(revision)
        }
    }
}
