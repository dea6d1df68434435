/// What the simulator reads from one server's `/metrics`.
public struct ServerMetricsSnapshot: Sendable, Equatable {
    /// `revsync_catchup_duration_seconds`, every `source` label value added up.
    public var catchUp: BucketHistogram
    /// `revsync_head_revision`; nil when the exposition has no such gauge.
    public var headRevision: Int64?

    public static let catchUpMetric = "revsync_catchup_duration_seconds"
    public static let headRevisionMetric = "revsync_head_revision"

    public init(catchUp: BucketHistogram = BucketHistogram(), headRevision: Int64? = nil) {
        self.catchUp = catchUp
        self.headRevision = headRevision
    }

    /// From the Prometheus text exposition.
    ///
    /// swift-prometheus 2.x renders a swift-metrics `Timer` as a histogram in seconds:
    /// cumulative `<name>_bucket{source="…",le="0.00025"}` lines up to `le="+Inf"`, then
    /// `_sum` and `_count`, one group per label set. The gauge is a float (`3.0`).
    public init(exposition: String) {
        self.init(samples: PrometheusText.parse(exposition))
    }

    public init(samples: [PrometheusSample]) {
        let bucketName = Self.catchUpMetric + "_bucket"
        // Cumulative counts per label set (without `le`), so each series is made non-cumulative on its own.
        var series: [[String: String]: [(upperBound: Double, count: UInt64)]] = [:]
        var head: Int64?
        for sample in samples {
            if sample.name == bucketName, let le = sample.labels["le"], let upperBound = PrometheusText.parseValue(Substring(le)),
                sample.value.isFinite, sample.value >= 0
            {
                var key = sample.labels
                key["le"] = nil
                series[key, default: []].append((upperBound, UInt64(sample.value)))
            } else if sample.name == Self.headRevisionMetric, sample.labels.isEmpty, sample.value.isFinite {
                head = Int64(exactly: sample.value.rounded()) ?? head
            }
        }
        var catchUp = BucketHistogram()
        for buckets in series.values { catchUp.add(BucketHistogram(cumulative: buckets)) }
        self.init(catchUp: catchUp, headRevision: head)
    }
}
