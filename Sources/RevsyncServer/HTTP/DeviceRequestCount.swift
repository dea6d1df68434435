import Synchronization

/// Requests of each device under way on one instance, so one token cannot take every
/// request slot (slow bodies sent with a valid token would otherwise starve other devices).
final class DeviceRequestCount: Sendable {
    private let counts = Mutex<[Int64: Int]>([:])
    let limit: Int

    init(limit: Int) { self.limit = max(1, limit) }

    /// Counts a request of `device`; false (not counted) when it has `limit` under way already.
    func enter(_ device: Int64) -> Bool {
        counts.withLock { counts in
            let current = counts[device, default: 0]
            guard current < limit else { return false }
            counts[device] = current + 1
            return true
        }
    }

    func leave(_ device: Int64) {
        counts.withLock { counts in
            let remaining = counts[device, default: 1] - 1
            counts[device] = remaining > 0 ? remaining : nil
        }
    }

    /// One request's place, given back when the last reference to it goes: a response body
    /// that runs after its handler returned (a JSON snapshot being sent) holds it to its end.
    final class Slot: Sendable {
        private let count: DeviceRequestCount
        private let device: Int64

        /// Nil when `device` has `count.limit` requests under way already.
        init?(_ count: DeviceRequestCount, device: Int64) {
            guard count.enter(device) else { return nil }
            self.count = count
            self.device = device
        }

        deinit { count.leave(device) }
    }
}
