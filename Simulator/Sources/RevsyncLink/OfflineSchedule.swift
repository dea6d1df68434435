/// Alternating online and offline spells with lengths drawn uniformly from
/// two ranges; the link draws them from its own seeded generator.
public struct OfflineSchedule: Sendable, Equatable {
    /// How long the link stays up between outages.
    public var online: ClosedRange<Duration>
    /// How long each outage lasts.
    public var offline: ClosedRange<Duration>

    /// Creates a schedule; the link starts online.
    public init(online: ClosedRange<Duration>, offline: ClosedRange<Duration>) {
        self.online = online
        self.offline = offline
    }

    /// The first `count` windows as (start after link creation, length),
    /// for logging a run's plan and for tests.
    public func windows(count: Int, seed: UInt64) -> [(start: Duration, length: Duration)] {
        var rng = SplitMix64(seed: seed)
        var clock = Duration.zero
        var result: [(start: Duration, length: Duration)] = []
        for _ in 0..<max(0, count) {
            let (up, down) = self.nextSpell(using: &rng)
            clock += up
            result.append((clock, down))
            clock += down
        }
        return result
    }

    /// One online spell and the outage after it.
    func nextSpell(using rng: inout SplitMix64) -> (online: Duration, offline: Duration) {
        (Self.draw(self.online, &rng), Self.draw(self.offline, &rng))
    }

    static func draw(_ range: ClosedRange<Duration>, _ rng: inout SplitMix64) -> Duration {
        range.lowerBound + (range.upperBound - range.lowerBound) * rng.nextUnit()
    }
}
