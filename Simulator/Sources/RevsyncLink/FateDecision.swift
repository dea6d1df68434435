import NIOCore

/// Everything drawn for one request at once, so each request consumes the same
/// number of random values whatever its fate and replays stay aligned.
struct FateDecision: Sendable {
    var fate: RequestFate
    /// Latency toward the server, before bandwidth delay.
    var upstreamDelay: TimeAmount
    /// Latency toward the device, before bandwidth delay.
    var downstreamDelay: TimeAmount
    /// Where a reset cuts the message body, as a fraction of its length.
    var cut: Double

    static func draw(_ profile: LinkProfile, _ rng: inout SplitMix64) -> FateDecision {
        let fate = profile.faults.fate(for: rng.nextUnit())
        let up = Self.delay(profile.upstreamLatency, rng.nextUnit())
        let down = Self.delay(profile.downstreamLatency, rng.nextUnit())
        return FateDecision(fate: fate, upstreamDelay: up, downstreamDelay: down, cut: rng.nextUnit())
    }

    static func delay(_ latency: LinkProfile.Latency, _ u: Double) -> TimeAmount {
        TimeAmount(latency.base + latency.jitter * u)
    }
}

extension LinkProfile {
    /// Time to push `bytes` through the bandwidth cap.
    func transferDelay(bytes: Int) -> TimeAmount {
        guard let rate = self.bandwidth, rate > 0 else { return .zero }
        return .nanoseconds(Int64(Double(bytes) / Double(rate) * 1_000_000_000))
    }
}
