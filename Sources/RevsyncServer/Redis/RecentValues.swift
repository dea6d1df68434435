import NIOCore
import Synchronization

/// The cache values of this instance's latest commits, kept in memory as well as in Redis,
/// so that a catch-up inside them skips its `MGET`.
///
/// A writing request's answer carries the change sets committed after its `maxRevision`:
/// under load, the batches of the other devices and its own, all of them just written to
/// Redis by this instance. Reading them back cost each request a round trip after its
/// batch (1.3–2.9 ms under load with 32 writers, docs/performance.md). A committed
/// revision's values never change (every form is made from the committed log, the same on
/// every instance), so a copy is as good as Redis's for as long as the cache itself is.
///
/// Only whole reads are served: a read that misses one key goes to Redis for all of them,
/// as before. Values are kept per commit batch, in commit order, and a batch is forgotten
/// once it is `capacity` revisions behind the newest.
final class RecentValues: Sendable {
    private struct Batch {
        let newest: Int64
        let slots: [CacheSlot]
    }

    private struct State {
        var values: [CacheSlot: ByteBuffer] = [:]
        var batches: [Batch] = []
        /// Batches before this index are forgotten (compacted away now and then).
        var oldest = 0
    }

    /// Revisions kept; 0 keeps nothing.
    let capacity: Int64
    private let state = Mutex(State())

    init(capacity: Int64) { self.capacity = max(0, capacity) }

    /// Keeps `values`, one commit batch whose newest revision is `newest`; forgets the
    /// batches that fell out of the window.
    func store(_ values: [CacheValue], newest: Int64) {
        guard capacity > 0 else { return }
        state.withLock { state in
            for value in values { state.values[value.slot] = value.value }
            state.batches.append(Batch(newest: newest, slots: values.map(\.slot)))
            while state.oldest < state.batches.count, state.batches[state.oldest].newest <= newest - capacity {
                for slot in state.batches[state.oldest].slots { state.values[slot] = nil }
                state.oldest += 1
            }
            if state.oldest > 64, state.oldest * 2 > state.batches.count {
                state.batches.removeFirst(state.oldest)
                state.oldest = 0
            }
        }
    }

    /// Every value of `slots`, in order; nil when any of them is not held.
    func values(_ slots: [CacheSlot]) -> [ByteBuffer?]? {
        guard capacity > 0, !slots.isEmpty else { return nil }
        return state.withLock { state in
            var found: [ByteBuffer?] = []
            found.reserveCapacity(slots.count)
            for slot in slots {
                guard let value = state.values[slot] else { return nil }
                found.append(value)
            }
            return found
        }
    }

    /// Puts the values held for `slots` where `values` (an `MGET`'s) has none: Redis lacks
    /// them yet (the batch's write is under way) or lost them, and the copy is as good.
    func fill(_ values: inout [ByteBuffer?], slots: [CacheSlot]) {
        guard capacity > 0, values.contains(where: { $0 == nil }) else { return }
        state.withLock { state in
            for index in values.indices where values[index] == nil {
                values[index] = state.values[slots[index]]
            }
        }
    }

    /// Forgets everything: the cache was dropped (its values may no longer be the log's).
    func removeAll() {
        state.withLock { $0 = State() }
    }

    /// Values held now (for tests).
    var count: Int { state.withLock { $0.values.count } }
}
