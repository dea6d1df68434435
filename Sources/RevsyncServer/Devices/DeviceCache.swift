/// Authenticated devices by token hash, so a catch-up request needs no query to authenticate.
///
/// Entries are dropped all at once when any device's token or role changes (the
/// `DeviceChangeWatcher` sees it on every instance within a poll), and while that
/// feed is unavailable they live at most `maxAge`. A look-up that missed carries the
/// cache's generation, and its result is stored only if nothing was invalidated
/// meanwhile: a read that raced a revocation never re-enters the cache.
actor DeviceCache {
    enum Lookup {
        case hit(Device)
        case miss(generation: Int)
    }

    private var devices: [[UInt8]: (device: Device, stored: ContinuousClock.Instant)] = [:]
    private var generation = 0
    /// How long an entry may be used; nil while invalidations arrive.
    private var maxAge: Duration? = .seconds(1)
    /// Devices seen since the last flush of `last_seen_at`.
    private var seen: Set<Int64> = []
    /// Bounded so that a flood of devices cannot grow it without limit.
    private let capacity = 100_000

    func lookup(_ hash: [UInt8]) -> Lookup {
        if let entry = devices[hash] {
            if let maxAge, ContinuousClock.now - entry.stored > maxAge {
                devices[hash] = nil
            } else {
                seen.insert(entry.device.id)
                return .hit(entry.device)
            }
        }
        return .miss(generation: generation)
    }

    func store(_ device: Device, for hash: [UInt8], generation: Int) {
        seen.insert(device.id)
        guard generation == self.generation else { return }
        if devices.count >= capacity { devices.removeAll(keepingCapacity: true) }
        devices[hash] = (device, ContinuousClock.now)
    }

    func invalidateAll() {
        devices.removeAll(keepingCapacity: true)
        generation += 1
    }

    func setMaxAge(_ maxAge: Duration?) { self.maxAge = maxAge }

    /// The devices seen since the last call.
    func takeSeen() -> Set<Int64> {
        defer { seen.removeAll(keepingCapacity: true) }
        return seen
    }
}
