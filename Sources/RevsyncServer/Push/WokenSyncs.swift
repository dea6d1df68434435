import Logging
import RevsyncRules
import Synchronization

/// The waiting requests that commits woke, answered by one task in turn: one commit wakes
/// thousands at once, and a task each would cost more than their answers (`SharedCatchUp`
/// gives them all one read of the log).
///
/// One task, not one per core: with two, the 10,000 answers of the push bench took as long
/// in all, and the writer's own answer came after them (324 ms against 70 ms).
final class WokenSyncs: Sendable {
    /// The instance's logger: a woken request's answer goes out from its connection
    /// (`ParkedSyncHandler`), past the middleware that logs every other request's failure.
    private let logger: Logger

    init(logger: Logger) {
        self.logger = logger
    }

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

    /// The answer to a woken request whose catch-up failed, logged as the middleware logs a
    /// request's failure: a server error at `warning`, anything unexpected at `error` with its
    /// details (the answer then names the device to look for in the log).
    func failed(_ error: any Error, device: Device) -> SyncError {
        let metadata: Logger.Metadata = ["device": "\(device.publicId)", "error": "\(String(reflecting: error))"]
        guard error is SyncError || error is SyncRefusal || error is StoreError else {
            logger.error("a woken request's catch-up failed", metadata: metadata)
            return SyncError(.internal, "the server failed to answer this request after a commit woke it; its log has the details under device \(device.publicId)")
        }
        let answer = SyncError(answering: error)
        if answer.status.code >= 500 { logger.warning("a woken request's catch-up failed", metadata: metadata) }
        return answer
    }
}
