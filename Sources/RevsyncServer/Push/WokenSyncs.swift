import Synchronization

/// The waiting requests that commits woke, answered by one task in turn: one commit wakes
/// thousands at once, and a task each would cost more than their answers (`SharedCatchUp`
/// gives them all one read of the log).
///
/// One task, not one per core: with two, the 10,000 answers of the push bench took as long
/// in all, and the writer's own answer came after them (324 ms against 70 ms).
final class WokenSyncs: Sendable {
    private struct Queue {
        var woken: [(pending: PendingSync, at: ContinuousClock.Instant)] = []
        var draining = false
    }

    private let queue = Mutex(Queue())

    func add(_ pending: PendingSync, wokenAt: ContinuousClock.Instant) {
        let start = queue.withLock { queue in
            queue.woken.append((pending, wokenAt))
            guard !queue.draining else { return false }
            queue.draining = true
            return true
        }
        // The requests one wake-up ends are all queued before the task runs.
        if start { Task { await drain() } }
    }

    private func drain() async {
        while true {
            let batch = queue.withLock { queue in
                defer { queue.woken = [] }
                if queue.woken.isEmpty { queue.draining = false }
                return queue.woken
            }
            guard !batch.isEmpty else { return }
            for (pending, at) in batch { await pending.answerWoken(at: at) }
        }
    }
}
