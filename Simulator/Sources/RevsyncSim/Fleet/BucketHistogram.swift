/// A latency distribution as a Prometheus histogram holds it: a count per bucket, with
/// bucket upper bounds in seconds (`le`), the last one `+Inf`.
///
/// Counts are kept per bucket, not cumulatively, so that histograms of several label
/// values, instances and process incarnations add up bucket by bucket.
public struct BucketHistogram: Sendable, Equatable {
    /// Observations per bucket, keyed by the bucket's upper bound in seconds (`.infinity` for `+Inf`).
    public private(set) var counts: [Double: UInt64] = [:]

    public init() {}

    /// From Prometheus's cumulative `_bucket` series: `(le, observations ≤ le)`, in any order.
    ///
    /// A cumulative count lower than the one of a smaller bound (a scrape torn between
    /// two updates) counts as zero for that bucket.
    public init(cumulative: [(upperBound: Double, count: UInt64)]) {
        var below: UInt64 = 0
        for (upperBound, count) in cumulative.sorted(by: { $0.upperBound < $1.upperBound }) {
            counts[upperBound, default: 0] += count > below ? count - below : 0
            below = Swift.max(below, count)
        }
    }

    /// Observations in all buckets.
    public var count: UInt64 { counts.values.reduce(0, +) }

    public static func + (lhs: BucketHistogram, rhs: BucketHistogram) -> BucketHistogram {
        var sum = lhs
        sum.add(rhs)
        return sum
    }

    public mutating func add(_ other: BucketHistogram) {
        for (upperBound, count) in other.counts { counts[upperBound, default: 0] += count }
    }

    /// p50, p90, p99 and max in milliseconds, estimated from the buckets; nil when empty.
    ///
    /// A percentile is interpolated linearly inside the bucket that holds its rank, between
    /// the bucket's lower bound (the next smaller bound, 0 for the first bucket) and its
    /// upper bound, as Prometheus's `histogram_quantile` does. A rank that falls in the
    /// `+Inf` bucket gets the highest finite bound.
    ///
    /// `max` is the upper bound of the highest non-empty bucket: the true maximum is at most
    /// that, and may be anywhere in the bucket. When only the `+Inf` bucket holds the
    /// largest observations, `max` is the highest finite bound, which understates it.
    public func percentiles() -> LatencyPercentiles? {
        let buckets = counts.filter { $0.value > 0 || $0.key.isFinite }.sorted { $0.key < $1.key }
        let total = count
        guard total > 0 else { return nil }
        let highestFinite = buckets.last(where: { $0.key.isFinite })?.key ?? 0
        let highestNonEmpty = buckets.last(where: { $0.value > 0 })?.key ?? 0
        let max = highestNonEmpty.isFinite ? highestNonEmpty : highestFinite
        let milliseconds = 1000.0
        return LatencyPercentiles(
            count: Int(clamping: total),
            p50: quantile(0.5, buckets: buckets, total: total, highestFinite: highestFinite) * milliseconds,
            p90: quantile(0.9, buckets: buckets, total: total, highestFinite: highestFinite) * milliseconds,
            p99: quantile(0.99, buckets: buckets, total: total, highestFinite: highestFinite) * milliseconds,
            max: max * milliseconds)
    }

    private func quantile(_ q: Double, buckets: [(key: Double, value: UInt64)], total: UInt64, highestFinite: Double) -> Double {
        let rank = q * Double(total)
        var cumulative: UInt64 = 0
        var lowerBound = 0.0
        for (upperBound, count) in buckets {
            let before = cumulative
            cumulative += count
            if count > 0, Double(cumulative) >= rank {
                guard upperBound.isFinite else { return highestFinite }
                let fraction = (rank - Double(before)) / Double(count)
                return lowerBound + (upperBound - lowerBound) * Swift.min(Swift.max(fraction, 0), 1)
            }
            lowerBound = upperBound
        }
        return highestFinite
    }
}
