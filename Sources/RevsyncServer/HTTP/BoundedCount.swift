import Synchronization

/// How many things (open connections, requests in flight) one server instance holds at once, up to a limit.
final class BoundedCount: Sendable {
    private let open = Atomic<Int>(0)

    /// Counts one more; false (and not counted) when `limit` are held already.
    func enter(limit: Int) -> Bool {
        while true {
            let current = open.load(ordering: .relaxed)
            guard current < limit else { return false }
            if open.compareExchange(expected: current, desired: current + 1, ordering: .relaxed).exchanged { return true }
        }
    }

    func leave() { open.subtract(1, ordering: .relaxed) }

    /// Counts one more past the limit: one that left for a while comes back (a waiting request).
    func enterAnyway() { open.add(1, ordering: .relaxed) }

    var value: Int { open.load(ordering: .relaxed) }
}
