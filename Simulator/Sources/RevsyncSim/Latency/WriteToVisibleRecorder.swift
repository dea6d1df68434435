import Synchronization

/// The run's `WriteToVisibleTracker`, fed from every device's tasks at once: the
/// writers' transports (acknowledgements), the engines' revision observers
/// (applied revisions), the links (offline windows) and the run (restarts,
/// revocations). Every event is timed here, with one `ContinuousClock`.
final class WriteToVisibleRecorder: Sendable {
    private let tracker: Mutex<WriteToVisibleTracker>

    init(maxAwaited: Int = 50_000) {
        tracker = Mutex(WriteToVisibleTracker(maxAwaited: maxAwaited))
    }

    func acknowledged(_ revisions: [Int64], by writer: Int) {
        guard !revisions.isEmpty else { return }
        tracker.withLock { tracker in
            let now = ContinuousClock.now
            for revision in revisions.sorted() { tracker.acknowledged(revision, by: writer, at: now) }
        }
    }

    func applied(_ revision: Int64, on device: Int) {
        tracker.withLock { $0.applied(revision, on: device, at: .now) }
    }

    func setAbsent(_ reason: WriteToVisibleTracker.Absence, _ absent: Bool, device: Int) {
        tracker.withLock { $0.setAbsent(reason, absent, device: device) }
    }

    var summary: WriteToVisibleLatency { tracker.withLock { $0.summary } }
}
