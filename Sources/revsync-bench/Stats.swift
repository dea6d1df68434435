import Foundation
import Histogram

/// Latencies in microseconds, summarised with HdrHistogram.
struct Latencies: Codable {
    var p50: Double = 0
    var p90: Double = 0
    var p99: Double = 0
    var max: Double = 0
    var count: Int = 0

    init() {}

    init(_ samples: [Duration]) {
        var histogram = Histogram<UInt64>(numberOfSignificantValueDigits: .three)
        for sample in samples { _ = histogram.record(UInt64(Swift.max(1, sample.microseconds))) }
        p50 = Double(histogram.valueAtPercentile(50))
        p90 = Double(histogram.valueAtPercentile(90))
        p99 = Double(histogram.valueAtPercentile(99))
        self.max = Double(histogram.max)
        count = samples.count
    }

    /// `1.23 ms` style.
    static func format(_ microseconds: Double) -> String {
        microseconds >= 1000 ? String(format: "%.2f ms", microseconds / 1000) : String(format: "%.0f µs", microseconds)
    }
}

extension Duration {
    var microseconds: Int64 {
        let (seconds, attoseconds) = components
        return seconds * 1_000_000 + attoseconds / 1_000_000_000_000
    }

    var inSeconds: Double { Double(microseconds) / 1_000_000 }
}

/// Times `body` `count` times.
func measure(_ count: Int, _ body: () async throws -> Void) async throws -> [Duration] {
    var samples: [Duration] = []
    samples.reserveCapacity(count)
    let clock = ContinuousClock()
    for _ in 0..<count {
        samples.append(try await clock.measure { try await body() })
    }
    return samples
}
