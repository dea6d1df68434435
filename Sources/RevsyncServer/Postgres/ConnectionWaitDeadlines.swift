import NIOCore
import NIOPosix
import Synchronization

/// The deadlines of every wait for a PostgreSQL connection of one `Database`, served by one
/// timer.
///
/// Each wait had a child task sleeping until its deadline. A lease is almost always granted
/// in microseconds, so the sleep was cancelled, but its timer still fired at the deadline:
/// every lease woke a thread ten seconds later, and an idle server used measurably more CPU
/// for ten seconds after every burst (docs/performance.md). Here every wait has the same
/// limit, so deadlines come in the order the waits began: a queue, whose front is the only
/// one the timer needs. A wait that got its connection stays queued until it reaches the
/// front, where it is dropped without a wake-up; the queue holds only the waits from the
/// oldest still waiting on.
final class ConnectionWaitDeadlines: Sendable {
    private struct Entry {
        let at: NIODeadline
        let handoff: ConnectionHandoff
    }

    private struct State {
        /// Earliest first, from `start` on; the dropped front is compacted away in bulk.
        var entries: [Entry] = []
        var start = 0
        /// Whether the timer is armed (at the front's deadline): it is while any entry is
        /// queued. It is never cancelled, only armed again when it fires, so nothing keeps it.
        var armed = false
        var count: Int { entries.count - start }

        /// Drops the waits at the front that no longer wait, and those due at `now` if given,
        /// returning the due ones (to be expired).
        mutating func dropFront(dueAt now: NIODeadline?) -> [ConnectionHandoff] {
            var due: [ConnectionHandoff] = []
            while start < entries.count {
                let entry = entries[start]
                if let now, entry.at <= now {
                    due.append(entry.handoff)
                } else if entry.handoff.isWaiting {
                    break
                }
                start += 1
            }
            if start == entries.count {
                entries.removeAll(keepingCapacity: entries.capacity <= 1024)
                start = 0
            } else if start > 256 && start * 2 > entries.count {
                entries.removeFirst(start)
                start = 0
            }
            return due
        }
    }

    let limit: Duration
    private let state = Mutex(State())
    private let loop: any EventLoop

    init(limit: Duration, loop: any EventLoop = MultiThreadedEventLoopGroup.singleton.any()) {
        self.limit = limit
        self.loop = loop
    }

    /// Waits queued, including ones that ended and have not reached the front yet.
    var count: Int { state.withLock { $0.count } }

    /// `handoff` is expired (`ConnectionHandoff.expire()`) unless a connection was lent to it
    /// within `limit` from now.
    func add(_ handoff: ConnectionHandoff) {
        let at = NIODeadline.now() + .nanoseconds(limit.nanoseconds)
        state.withLock { state in
            _ = state.dropFront(dueAt: nil)
            state.entries.append(Entry(at: at, handoff: handoff))
            if !state.armed {
                state.armed = true
                schedule(at: at)
            }
        }
    }

    private func schedule(at deadline: NIODeadline) {
        loop.scheduleTask(deadline: deadline) { [self] in fire() }
    }

    private func fire() {
        let due: [ConnectionHandoff] = state.withLock { state in
            let due = state.dropFront(dueAt: .now())
            state.armed = state.count > 0
            if state.armed { schedule(at: state.entries[state.start].at) }
            return due
        }
        // Outside the lock: an expiry resumes the waiting caller.
        for handoff in due { _ = handoff.expire() }
    }
}
