/// Authenticated devices by token hash, so a catch-up request needs no query to authenticate.
///
/// Entries are dropped all at once when any device's token or role changes (the
/// `DeviceChangeWatcher` hears it on every instance as it is announced). They live until then
/// only while the feed is known to work (`follow(until:)`, renewed by each of the watcher's
/// checks), and at most `maxAge` otherwise. A look-up that missed carries the
/// cache's generation, and its result is stored only if nothing was invalidated
/// meanwhile: a read that raced a revocation never re-enters the cache.
actor DeviceCache {
    enum Lookup {
        case hit(Device)
        /// Looked up recently and not found: no need to ask PostgreSQL again.
        case unknown
        case miss(generation: Int)
        /// Too many look-ups of uncached tokens this second: PostgreSQL is not asked.
        case throttled
    }

    private var devices: [[UInt8]: (device: Device, stored: ContinuousClock.Instant)] = [:]
    private var generation = 0
    /// How long an entry may be used while changes are not known to be heard.
    private var maxAge: Duration = .seconds(1)
    /// Until when changes are known to be heard; nil while they are not. A lease rather than
    /// a flag: a Redis that stops answering without closing the connection (a partition) is
    /// known only when a call times out, and until then a change announced meanwhile is not
    /// heard. The lease lapses by itself when the checks that renew it stop succeeding.
    private var followedUntil: ContinuousClock.Instant? = nil
    /// Devices seen since the last flush of `last_seen_at`.
    private var seen: Set<Int64> = []
    /// Bounded so that a flood of devices cannot grow it without limit.
    private let capacity = 100_000
    /// Tokens PostgreSQL did not know, with when; a client repeating a bad token costs no query.
    private var unknownTokens: [[UInt8]: ContinuousClock.Instant] = [:]
    private let unknownCapacity = 10_000
    private let unknownLifetime: Duration = .seconds(60)
    /// Look-ups of uncached tokens allowed per second (a token bucket), so random tokens
    /// cannot be used to hammer PostgreSQL; past it a request gets `503` and retries.
    private let lookupsPerSecond: Double
    private var lookupBudget: Double
    private var budgetRefilled = ContinuousClock.now

    init(lookupsPerSecond: Int = 2000) {
        self.lookupsPerSecond = Double(max(1, lookupsPerSecond))
        self.lookupBudget = Double(max(1, lookupsPerSecond))
    }

    func lookup(_ hash: [UInt8]) -> Lookup {
        if let entry = devices[hash] {
            let now = ContinuousClock.now
            if !followed(at: now), now - entry.stored > maxAge {
                devices[hash] = nil
            } else {
                seen.insert(entry.device.id)
                return .hit(entry.device)
            }
        }
        if let noted = unknownTokens[hash] {
            if ContinuousClock.now - noted < unknownLifetime { return .unknown }
            unknownTokens[hash] = nil
        }
        let now = ContinuousClock.now
        lookupBudget = min(lookupsPerSecond, lookupBudget + (now - budgetRefilled).seconds * lookupsPerSecond)
        budgetRefilled = now
        guard lookupBudget >= 1 else { return .throttled }
        lookupBudget -= 1
        return .miss(generation: generation)
    }

    /// Notes a token PostgreSQL does not know. Tokens are random and new ones are never
    /// looked up before they exist, so a noted token cannot later become valid.
    func storeUnknown(_ hash: [UInt8]) {
        if unknownTokens.count >= unknownCapacity { unknownTokens.removeAll(keepingCapacity: true) }
        unknownTokens[hash] = ContinuousClock.now
    }

    /// Keeps what PostgreSQL said of a token, unless the cache was invalidated since the
    /// look-up missed (`generation`).
    /// - Parameter readAt: when the query was sent: an entry's age counts from then, so that a
    ///   row read just before a change lives no longer than `maxAge` after it, however late
    ///   the answer came.
    func store(_ device: Device, for hash: [UInt8], generation: Int, readAt: ContinuousClock.Instant = .now) {
        seen.insert(device.id)
        guard generation == self.generation else { return }
        if devices.count >= capacity { devices.removeAll(keepingCapacity: true) }
        devices[hash] = (device, readAt)
    }

    func invalidateAll() {
        devices.removeAll(keepingCapacity: true)
        unknownTokens.removeAll(keepingCapacity: true)
        generation += 1
    }

    func setMaxAge(_ maxAge: Duration) { self.maxAge = maxAge }

    /// Entries live until a change is announced up to `instant`; from then on (from now, when
    /// nil) an entry is used only while it is younger than `maxAge`, counted from when it was read.
    func follow(until instant: ContinuousClock.Instant?) { followedUntil = instant }

    /// Whether entries live until a change is announced (the feed is followed), not `maxAge`.
    var followsChanges: Bool { followed(at: .now) }

    private func followed(at now: ContinuousClock.Instant) -> Bool { followedUntil.map { now < $0 } ?? false }

    /// The devices seen since the last call.
    func takeSeen() -> Set<Int64> {
        defer { seen.removeAll(keepingCapacity: true) }
        return seen
    }
}

extension Duration {
    /// The duration in seconds, as a floating-point number.
    var seconds: Double {
        let (seconds, attoseconds) = components
        return Double(seconds) + Double(attoseconds) / 1e18
    }
}
