import Histogram
import RevsyncDevice
import Synchronization

/// What every device's HTTP exchanges added up to: bytes, and the latency of
/// catch-up requests (`/sync` with no change set, long-polls left out: they last
/// as long as the server holds them) overall, per second of the run, and on an instance
/// while it is cut from Redis (`FaultKind.redisPartition`). Fed by `HTTPSyncTransport`'s
/// observer from many tasks at once.
final class ExchangeStats: Sendable {
    private struct State {
        var bytes = ByteCounts()
        var catchUp = Histogram<UInt64>(lowestDiscernibleValue: 1, highestTrackableValue: 3_600_000_000, numberOfSignificantValueDigits: .three)
        var interval = Histogram<UInt64>(lowestDiscernibleValue: 1, highestTrackableValue: 3_600_000_000, numberOfSignificantValueDigits: .three)
        var failedExchanges = 0
        var snapshots = SnapshotDownloads()
        /// The instance cut from Redis now, if any, and the catch-ups its devices finished meanwhile.
        var cutInstance: Int?
        var catchUpCut = Histogram<UInt64>(lowestDiscernibleValue: 1, highestTrackableValue: 3_600_000_000, numberOfSignificantValueDigits: .three)
    }

    private let state = Mutex(State())

    /// Records one finished exchange, of a device whose requests go to `instance` (by index).
    func record(_ exchange: HTTPExchange, instance: Int? = nil) {
        state.withLock { state in
            state.bytes.requestRaw += exchange.requestRawBytes
            state.bytes.requestWire += exchange.requestWireBytes
            state.bytes.responseRaw += exchange.responseRawBytes
            state.bytes.responseWire += exchange.responseWireBytes
            if exchange.path == "/snapshot" { state.snapshots.record(sqliteFile: exchange.snapshotFile, status: exchange.status) }
            guard let status = exchange.status else {
                state.failedExchanges += 1
                return
            }
            // Catch-up as a device sees it: a successful /sync that carried nothing to apply.
            if exchange.path == "/sync", exchange.changeSets == 0, status == 200, (exchange.wait ?? 0) == 0 {
                let micros = UInt64(max(1, exchange.duration.microseconds))
                _ = state.catchUp.record(micros)
                _ = state.interval.record(micros)
                if let instance, instance == state.cutInstance { _ = state.catchUpCut.record(micros) }
            }
        }
    }

    var bytes: ByteCounts { state.withLock { $0.bytes } }

    var snapshots: SnapshotDownloads { state.withLock { $0.snapshots } }

    var catchUpLatency: LatencyPercentiles { state.withLock { Self.percentiles($0.catchUp) } }

    /// The instance (by index) cut from Redis from now on; nil once it is healed.
    func setCutInstance(_ instance: Int?) { state.withLock { $0.cutInstance = instance } }

    /// Catch-ups of devices whose instance was cut from Redis as they finished; nil without one.
    var catchUpWhileCutLatency: LatencyPercentiles? {
        state.withLock { $0.catchUpCut.totalCount > 0 ? Self.percentiles($0.catchUpCut) : nil }
    }

    /// p50 and p99 (ms) since the last call, for the timeline; nil without a sample.
    func takeInterval() -> (p50: Double, p99: Double)? {
        state.withLock { state in
            defer { state.interval.reset() }
            guard state.interval.totalCount > 0 else { return nil }
            return (Self.milliseconds(state.interval.valueAtPercentile(50)), Self.milliseconds(state.interval.valueAtPercentile(99)))
        }
    }

    static func percentiles(_ histogram: Histogram<UInt64>) -> LatencyPercentiles {
        guard histogram.totalCount > 0 else { return LatencyPercentiles(count: 0, p50: 0, p90: 0, p99: 0, max: 0) }
        return LatencyPercentiles(
            count: Int(histogram.totalCount), p50: milliseconds(histogram.valueAtPercentile(50)),
            p90: milliseconds(histogram.valueAtPercentile(90)), p99: milliseconds(histogram.valueAtPercentile(99)),
            max: milliseconds(histogram.max))
    }

    static func milliseconds(_ micros: UInt64) -> Double { Double(micros) / 1000 }
}

extension Duration {
    var microseconds: Int64 {
        let (seconds, attoseconds) = components
        return seconds * 1_000_000 + attoseconds / 1_000_000_000_000
    }

    var inSeconds: Double {
        let (seconds, attoseconds) = components
        return Double(seconds) + Double(attoseconds) / 1e18
    }
}
