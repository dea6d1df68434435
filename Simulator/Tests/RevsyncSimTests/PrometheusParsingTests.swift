import Testing
@testable import RevsyncSim

/// Real `/metrics` of `revsync serve` (swift-prometheus 2.4.1): five empty syncs answered
/// from Redis, three syncs that each sent a change set, FLUSHALL, then three catch-ups from
/// revision 1 (one of them "mixed": partly from PostgreSQL).
let sampleMetricsExposition = """
    # TYPE revsync_cache_misses_total counter
    revsync_cache_misses_total 2
    # TYPE revsync_cache_writes_total counter
    revsync_cache_writes_total 3
    # TYPE revsync_catchup_duration_seconds histogram
    revsync_catchup_duration_seconds_bucket{source="redis",le="0.00025"} 5
    revsync_catchup_duration_seconds_bucket{source="redis",le="0.0005"} 9
    revsync_catchup_duration_seconds_bucket{source="redis",le="0.001"} 10
    revsync_catchup_duration_seconds_bucket{source="redis",le="0.002"} 10
    revsync_catchup_duration_seconds_bucket{source="redis",le="0.005"} 10
    revsync_catchup_duration_seconds_bucket{source="redis",le="0.01"} 10
    revsync_catchup_duration_seconds_bucket{source="redis",le="0.025"} 10
    revsync_catchup_duration_seconds_bucket{source="redis",le="0.05"} 10
    revsync_catchup_duration_seconds_bucket{source="redis",le="0.1"} 10
    revsync_catchup_duration_seconds_bucket{source="redis",le="0.25"} 10
    revsync_catchup_duration_seconds_bucket{source="redis",le="0.5"} 10
    revsync_catchup_duration_seconds_bucket{source="redis",le="1.0"} 10
    revsync_catchup_duration_seconds_bucket{source="redis",le="5.0"} 10
    revsync_catchup_duration_seconds_bucket{source="redis",le="+Inf"} 10
    revsync_catchup_duration_seconds_sum{source="redis"} 0.002029955
    revsync_catchup_duration_seconds_count{source="redis"} 10
    revsync_catchup_duration_seconds_bucket{source="mixed",le="0.00025"} 0
    revsync_catchup_duration_seconds_bucket{source="mixed",le="0.0005"} 0
    revsync_catchup_duration_seconds_bucket{source="mixed",le="0.001"} 0
    revsync_catchup_duration_seconds_bucket{source="mixed",le="0.002"} 0
    revsync_catchup_duration_seconds_bucket{source="mixed",le="0.005"} 1
    revsync_catchup_duration_seconds_bucket{source="mixed",le="0.01"} 1
    revsync_catchup_duration_seconds_bucket{source="mixed",le="0.025"} 1
    revsync_catchup_duration_seconds_bucket{source="mixed",le="0.05"} 1
    revsync_catchup_duration_seconds_bucket{source="mixed",le="0.1"} 1
    revsync_catchup_duration_seconds_bucket{source="mixed",le="0.25"} 1
    revsync_catchup_duration_seconds_bucket{source="mixed",le="0.5"} 1
    revsync_catchup_duration_seconds_bucket{source="mixed",le="1.0"} 1
    revsync_catchup_duration_seconds_bucket{source="mixed",le="5.0"} 1
    revsync_catchup_duration_seconds_bucket{source="mixed",le="+Inf"} 1
    revsync_catchup_duration_seconds_sum{source="mixed"} 0.002054472
    revsync_catchup_duration_seconds_count{source="mixed"} 1
    # TYPE revsync_cache_hits_total counter
    revsync_cache_hits_total 10
    # TYPE revsync_http_request_duration_seconds histogram
    revsync_http_request_duration_seconds_bucket{route="/devices",le="0.00025"} 0
    revsync_http_request_duration_seconds_bucket{route="/devices",le="0.0005"} 0
    revsync_http_request_duration_seconds_bucket{route="/devices",le="0.001"} 0
    revsync_http_request_duration_seconds_bucket{route="/devices",le="0.002"} 0
    revsync_http_request_duration_seconds_bucket{route="/devices",le="0.005"} 1
    revsync_http_request_duration_seconds_bucket{route="/devices",le="0.01"} 2
    revsync_http_request_duration_seconds_bucket{route="/devices",le="0.025"} 2
    revsync_http_request_duration_seconds_bucket{route="/devices",le="0.05"} 2
    revsync_http_request_duration_seconds_bucket{route="/devices",le="0.1"} 2
    revsync_http_request_duration_seconds_bucket{route="/devices",le="0.25"} 2
    revsync_http_request_duration_seconds_bucket{route="/devices",le="0.5"} 2
    revsync_http_request_duration_seconds_bucket{route="/devices",le="1.0"} 2
    revsync_http_request_duration_seconds_bucket{route="/devices",le="5.0"} 2
    revsync_http_request_duration_seconds_bucket{route="/devices",le="+Inf"} 2
    revsync_http_request_duration_seconds_sum{route="/devices"} 0.007689292
    revsync_http_request_duration_seconds_count{route="/devices"} 2
    revsync_http_request_duration_seconds_bucket{route="/sync",le="0.00025"} 0
    revsync_http_request_duration_seconds_bucket{route="/sync",le="0.0005"} 0
    revsync_http_request_duration_seconds_bucket{route="/sync",le="0.001"} 2
    revsync_http_request_duration_seconds_bucket{route="/sync",le="0.002"} 6
    revsync_http_request_duration_seconds_bucket{route="/sync",le="0.005"} 8
    revsync_http_request_duration_seconds_bucket{route="/sync",le="0.01"} 9
    revsync_http_request_duration_seconds_bucket{route="/sync",le="0.025"} 11
    revsync_http_request_duration_seconds_bucket{route="/sync",le="0.05"} 11
    revsync_http_request_duration_seconds_bucket{route="/sync",le="0.1"} 11
    revsync_http_request_duration_seconds_bucket{route="/sync",le="0.25"} 11
    revsync_http_request_duration_seconds_bucket{route="/sync",le="0.5"} 11
    revsync_http_request_duration_seconds_bucket{route="/sync",le="1.0"} 11
    revsync_http_request_duration_seconds_bucket{route="/sync",le="5.0"} 11
    revsync_http_request_duration_seconds_bucket{route="/sync",le="+Inf"} 11
    revsync_http_request_duration_seconds_sum{route="/sync"} 0.046267545
    revsync_http_request_duration_seconds_count{route="/sync"} 11
    revsync_http_request_duration_seconds_bucket{route="/ready",le="0.00025"} 0
    revsync_http_request_duration_seconds_bucket{route="/ready",le="0.0005"} 0
    revsync_http_request_duration_seconds_bucket{route="/ready",le="0.001"} 0
    revsync_http_request_duration_seconds_bucket{route="/ready",le="0.002"} 1
    revsync_http_request_duration_seconds_bucket{route="/ready",le="0.005"} 1
    revsync_http_request_duration_seconds_bucket{route="/ready",le="0.01"} 1
    revsync_http_request_duration_seconds_bucket{route="/ready",le="0.025"} 1
    revsync_http_request_duration_seconds_bucket{route="/ready",le="0.05"} 1
    revsync_http_request_duration_seconds_bucket{route="/ready",le="0.1"} 1
    revsync_http_request_duration_seconds_bucket{route="/ready",le="0.25"} 1
    revsync_http_request_duration_seconds_bucket{route="/ready",le="0.5"} 1
    revsync_http_request_duration_seconds_bucket{route="/ready",le="1.0"} 1
    revsync_http_request_duration_seconds_bucket{route="/ready",le="5.0"} 1
    revsync_http_request_duration_seconds_bucket{route="/ready",le="+Inf"} 1
    revsync_http_request_duration_seconds_sum{route="/ready"} 0.001666118
    revsync_http_request_duration_seconds_count{route="/ready"} 1
    revsync_http_request_duration_seconds_bucket{route="/metrics",le="0.00025"} 0
    revsync_http_request_duration_seconds_bucket{route="/metrics",le="0.0005"} 1
    revsync_http_request_duration_seconds_bucket{route="/metrics",le="0.001"} 1
    revsync_http_request_duration_seconds_bucket{route="/metrics",le="0.002"} 1
    revsync_http_request_duration_seconds_bucket{route="/metrics",le="0.005"} 1
    revsync_http_request_duration_seconds_bucket{route="/metrics",le="0.01"} 1
    revsync_http_request_duration_seconds_bucket{route="/metrics",le="0.025"} 1
    revsync_http_request_duration_seconds_bucket{route="/metrics",le="0.05"} 1
    revsync_http_request_duration_seconds_bucket{route="/metrics",le="0.1"} 1
    revsync_http_request_duration_seconds_bucket{route="/metrics",le="0.25"} 1
    revsync_http_request_duration_seconds_bucket{route="/metrics",le="0.5"} 1
    revsync_http_request_duration_seconds_bucket{route="/metrics",le="1.0"} 1
    revsync_http_request_duration_seconds_bucket{route="/metrics",le="5.0"} 1
    revsync_http_request_duration_seconds_bucket{route="/metrics",le="+Inf"} 1
    revsync_http_request_duration_seconds_sum{route="/metrics"} 0.000342467
    revsync_http_request_duration_seconds_count{route="/metrics"} 1
    # TYPE revsync_cache_up gauge
    revsync_cache_up 1.0
    # TYPE revsync_cache_backfills_total counter
    revsync_cache_backfills_total 1
    # TYPE revsync_catchup_change_sets_total counter
    revsync_catchup_change_sets_total 12
    # TYPE revsync_http_requests_total counter
    revsync_http_requests_total{route="/ready",status="200"} 1
    revsync_http_requests_total{route="/metrics",status="200"} 1
    revsync_http_requests_total{route="/devices",status="201"} 2
    revsync_http_requests_total{route="/sync",status="200"} 11
    # TYPE revsync_head_revision gauge
    revsync_head_revision 3.0
    # TYPE revsync_apply_duration_seconds histogram
    revsync_apply_duration_seconds_bucket{le="0.00025"} 0
    revsync_apply_duration_seconds_bucket{le="0.0005"} 0
    revsync_apply_duration_seconds_bucket{le="0.001"} 0
    revsync_apply_duration_seconds_bucket{le="0.002"} 0
    revsync_apply_duration_seconds_bucket{le="0.005"} 0
    revsync_apply_duration_seconds_bucket{le="0.01"} 3
    revsync_apply_duration_seconds_bucket{le="0.025"} 3
    revsync_apply_duration_seconds_bucket{le="0.05"} 3
    revsync_apply_duration_seconds_bucket{le="0.1"} 3
    revsync_apply_duration_seconds_bucket{le="0.25"} 3
    revsync_apply_duration_seconds_bucket{le="0.5"} 3
    revsync_apply_duration_seconds_bucket{le="1.0"} 3
    revsync_apply_duration_seconds_bucket{le="5.0"} 3
    revsync_apply_duration_seconds_bucket{le="+Inf"} 3
    revsync_apply_duration_seconds_sum 0.024150555
    revsync_apply_duration_seconds_count 3
    # TYPE revsync_change_sets_applied_total counter
    revsync_change_sets_applied_total{entity="leagues"} 3
    """

/// Reading `/metrics`: the text format, the catch-up histogram, percentile estimates, restarts.
@Suite enum PrometheusParsingTests {}

extension PrometheusParsingTests {
    @Suite struct Text {
        @Test func readsNameLabelsAndValueAndSkipsComments() {
            let samples = PrometheusText.parse(sampleMetricsExposition)
            #expect(!samples.contains { $0.name.hasPrefix("#") })
            #expect(samples.contains(PrometheusSample(name: "revsync_cache_up", value: 1)))
            #expect(
                samples.contains(
                    PrometheusSample(name: "revsync_http_requests_total", labels: ["route": "/sync", "status": "200"], value: 11)))
            #expect(
                samples.contains(
                    PrometheusSample(
                        name: "revsync_catchup_duration_seconds_bucket", labels: ["source": "mixed", "le": "+Inf"], value: 1)))
        }

        @Test func labelValuesMayHoldEscapesCommasAndBraces() throws {
            let sample = try #require(PrometheusText.parseLine(#"m{a="x\"y\\z",b="one\ntwo",c="{,}"} 1.5 1700000000000"#))
            #expect(sample == PrometheusSample(name: "m", labels: ["a": "x\"y\\z", "b": "one\ntwo", "c": "{,}"], value: 1.5))
        }

        @Test func specialValuesAndMalformedLinesAreHandled() {
            #expect(PrometheusText.parseLine("up +Inf")?.value == .infinity)
            #expect(PrometheusText.parseLine("down -Inf")?.value == -.infinity)
            #expect(PrometheusText.parseLine("odd NaN")?.value.isNaN == true)
            #expect(PrometheusText.parseLine("") == nil)
            #expect(PrometheusText.parseLine("# TYPE x counter") == nil)
            #expect(PrometheusText.parseLine("torn{source=\"redis\",le=") == nil)
            #expect(PrometheusText.parseLine("novalue") == nil)
            #expect(PrometheusText.parseLine("bad 12abc") == nil)
        }
    }

    @Suite struct Snapshot {
        @Test func catchUpBucketsOfEverySourceAddUp() {
            let snapshot = ServerMetricsSnapshot(exposition: sampleMetricsExposition)
            // redis: 5 ≤ 0.25 ms, 4 more ≤ 0.5 ms, 1 more ≤ 1 ms; mixed: 1 in (2 ms, 5 ms].
            #expect(snapshot.catchUp.count == 11)
            #expect(snapshot.catchUp.counts[0.00025] == 5)
            #expect(snapshot.catchUp.counts[0.0005] == 4)
            #expect(snapshot.catchUp.counts[0.001] == 1)
            #expect(snapshot.catchUp.counts[0.002] == 0)
            #expect(snapshot.catchUp.counts[0.005] == 1)
            #expect(snapshot.catchUp.counts[.infinity] == 0)
            #expect(snapshot.headRevision == 3)
        }

        @Test func otherHistogramsAreNotTakenForCatchUp() {
            let text = """
                revsync_http_request_duration_seconds_bucket{route="/sync",le="0.001"} 7
                revsync_http_request_duration_seconds_bucket{route="/sync",le="+Inf"} 7
                """
            let snapshot = ServerMetricsSnapshot(exposition: text)
            #expect(snapshot.catchUp.count == 0)
            #expect(snapshot.headRevision == nil)
        }

        @Test func percentilesAreInterpolatedInsideTheirBucket() throws {
            let latency = try #require(ServerMetricsSnapshot(exposition: sampleMetricsExposition).catchUp.percentiles())
            #expect(latency.count == 11)
            // p50: rank 5.5 is 0.5 of 4 into (0.25, 0.5] ms.
            #expect(abs(latency.p50 - 0.28125) < 1e-9)
            // p90: rank 9.9 is 0.9 of 1 into (0.5, 1] ms.
            #expect(abs(latency.p90 - 0.95) < 1e-9)
            // p99: rank 10.89 is 0.89 of 1 into (2, 5] ms; the empty (1, 2] bucket moves the lower bound.
            #expect(abs(latency.p99 - 4.67) < 1e-9)
            // max: the upper bound of the highest non-empty bucket.
            #expect(latency.max == 5)
        }

        @Test func observationsAboveTheLastFiniteBoundReportThatBound() throws {
            let histogram = BucketHistogram(cumulative: [(0.1, 1), (5, 2), (.infinity, 10)])
            let latency = try #require(histogram.percentiles())
            #expect(latency.count == 10)
            #expect(latency.p50 == 5000)
            #expect(latency.p99 == 5000)
            #expect(latency.max == 5000)
        }

        @Test func anEmptyHistogramHasNoPercentiles() {
            #expect(BucketHistogram().percentiles() == nil)
            #expect(ServerMetricsSnapshot(exposition: "revsync_head_revision 0.0").catchUp.percentiles() == nil)
        }

        @Test func aTornScrapeNeverCountsNegativeBuckets() {
            let histogram = BucketHistogram(cumulative: [(0.001, 5), (0.002, 4), (0.005, 6), (.infinity, 6)])
            #expect(histogram.counts == [0.001: 5, 0.002: 0, 0.005: 1, .infinity: 0])
        }
    }

    @Suite struct Incarnations {
        static func snapshot(_ cumulative: [(Double, UInt64)], head: Int64? = nil) -> ServerMetricsSnapshot {
            ServerMetricsSnapshot(
                catchUp: BucketHistogram(cumulative: cumulative.map { (upperBound: $0.0, count: $0.1) }), headRevision: head)
        }

        @Test func aRetiredIncarnationKeepsItsLastCounts() {
            var incarnations = MetricsIncarnations()
            incarnations.record(instance: 0, Self.snapshot([(0.001, 2), (.infinity, 2)]))
            incarnations.record(instance: 0, Self.snapshot([(0.001, 3), (.infinity, 4)]))
            incarnations.record(instance: 1, Self.snapshot([(0.001, 1), (.infinity, 1)]))
            incarnations.retire(instance: 0)
            // The restarted process counts from zero again.
            incarnations.record(instance: 0, Self.snapshot([(0.001, 1), (.infinity, 1)]))
            #expect(incarnations.catchUp.count == 4 + 1 + 1)
            #expect(incarnations.catchUp.counts == [0.001: 5, .infinity: 1])
        }

        @Test func aCountThatWentDownIsTakenForAnUnnoticedRestart() {
            var incarnations = MetricsIncarnations()
            incarnations.record(instance: 0, Self.snapshot([(0.001, 7), (.infinity, 7)]))
            incarnations.record(instance: 0, Self.snapshot([(0.001, 2), (.infinity, 2)]))
            #expect(incarnations.catchUp.count == 9)
        }

        @Test func theHeadIsTheHighestEverSeen() {
            var incarnations = MetricsIncarnations()
            #expect(incarnations.headRevision == nil)
            incarnations.record(instance: 0, Self.snapshot([], head: 12))
            incarnations.retire(instance: 0)
            incarnations.record(instance: 0, Self.snapshot([], head: 0))
            incarnations.record(instance: 1, Self.snapshot([], head: 9))
            #expect(incarnations.headRevision == 12)
        }
    }
}
