import RevsyncLink

/// Individual link settings laid over the `--link` preset; nil keeps the preset's.
public struct LinkKnobs: Sendable, Equatable {
    /// Base latency each way, and up to this much more at random.
    public var latency: Duration?
    public var jitter: Duration?
    /// Bytes per second each way; 0 removes the cap.
    public var bandwidth: Int?
    public var refuse: Double?
    public var resetMidRequest: Double?
    public var resetMidResponse: Double?
    public var stall: Double?
    public var dropAfterCommit: Double?
    public var duplicate: Double?
    public var split: Double?
    /// Offline windows; `.some(nil)` means never offline.
    public var offline: OfflineSchedule??

    public init() {}

    public var isEmpty: Bool { self == LinkKnobs() }

    public func apply(to preset: LinkProfile) -> LinkProfile {
        var profile = preset
        if let latency {
            profile.upstreamLatency.base = latency
            profile.downstreamLatency.base = latency
        }
        if let jitter {
            profile.upstreamLatency.jitter = jitter
            profile.downstreamLatency.jitter = jitter
        }
        if let bandwidth { profile.bandwidth = bandwidth == 0 ? nil : bandwidth }
        if let refuse { profile.faults.refuse = refuse }
        if let resetMidRequest { profile.faults.resetMidRequest = resetMidRequest }
        if let resetMidResponse { profile.faults.resetMidResponse = resetMidResponse }
        if let stall { profile.faults.stall = stall }
        if let dropAfterCommit { profile.faults.dropAfterCommit = dropAfterCommit }
        if let duplicate { profile.faults.duplicate = duplicate }
        if let split { profile.faults.split = split }
        if let offline { profile.offlineSchedule = offline }
        return profile
    }

    /// `never`, or `ONLINE/OFFLINE` seconds as ranges, e.g. `20-180/5-120`
    /// (online 20 s to 3 min, then offline 5 s to 2 min).
    public static func parseOffline(_ text: String) throws -> OfflineSchedule? {
        if text == "never" { return nil }
        let parts = text.split(separator: "/")
        func range(_ part: Substring) throws -> ClosedRange<Duration> {
            let ends = part.split(separator: "-").compactMap { Double($0) }
            guard ends.count == 2, ends[0] > 0, ends[0] <= ends[1] else {
                throw SoakError("--offline: \"\(part)\" is not MIN-MAX seconds with 0 < MIN <= MAX")
            }
            return .seconds(ends[0]) ... .seconds(ends[1])
        }
        guard parts.count == 2 else {
            throw SoakError("--offline must be never or ONLINE/OFFLINE ranges in seconds, e.g. 20-180/5-120, not \"\(text)\"")
        }
        return OfflineSchedule(online: try range(parts[0]), offline: try range(parts[1]))
    }
}
