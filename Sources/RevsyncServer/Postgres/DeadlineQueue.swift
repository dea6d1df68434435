import NIOCore
import NIOPosix
import Synchronization

/// What a `DeadlineQueue` expires: something that usually ends well before its deadline.
protocol Expiring: AnyObject, Sendable {
    /// Whether it still runs: one that ended is dropped from the queue without a wake-up.
    var isPending: Bool { get }
    /// Its deadline came. Returns true to be queued again, for one more limit from now.
    func deadlineCame() -> Bool
}

/// Deadlines of one length for many things at once, served by one timer: every wait of one
/// `Database` for a connection (`ConnectionHandoff`), and every look at a request's work on
/// its connection (`ConnectionLeaseWatch`, queued again after each).
///
/// Each wait had a child task sleeping until its deadline. A lease is almost always granted
/// in microseconds, so the sleep was cancelled, but its timer still fired at the deadline:
/// every lease woke a thread ten seconds later, and an idle server used measurably more CPU
/// for ten seconds after every burst (docs/performance.md). Here every item has the same
/// limit, so deadlines come in the order the items were added: a queue, whose front is the
/// only one the timer needs. An item that ended stays queued until it reaches the front,
/// where it is dropped without a wake-up; the queue holds only the items from the oldest
/// still pending on.
final class DeadlineQueue<Item: Expiring>: Sendable {
    private struct Entry {
        let at: NIODeadline
        let item: Item
    }

    private struct State {
        /// Earliest first, from `start` on; the dropped front is compacted away in bulk.
        var entries: [Entry] = []
        var start = 0
        /// Whether the timer is armed (at the front's deadline): it is while any entry is
        /// queued. It is never cancelled, only armed again when it fires, so nothing keeps it.
        var armed = false
        var count: Int { entries.count - start }

        /// Drops the items at the front that ended, and those due at `now` if given,
        /// returning the due ones (to be expired).
        mutating func dropFront(dueAt now: NIODeadline?) -> [Item] {
            var due: [Item] = []
            while start < entries.count {
                let entry = entries[start]
                if let now, entry.at <= now {
                    due.append(entry.item)
                } else if entry.item.isPending {
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

    /// Items queued, including ones that ended and have not reached the front yet.
    var count: Int { state.withLock { $0.count } }

    /// `item` is expired unless it ended within `limit` from now.
    func add(_ item: Item) {
        let at = NIODeadline.now() + .nanoseconds(limit.nanoseconds)
        state.withLock { state in
            _ = state.dropFront(dueAt: nil)
            state.entries.append(Entry(at: at, item: item))
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
        let due: [Item] = state.withLock { state in
            let due = state.dropFront(dueAt: .now())
            state.armed = state.count > 0
            if state.armed { schedule(at: state.entries[state.start].at) }
            return due
        }
        // Outside the lock: an expiry resumes a waiting caller, or closes a connection.
        for item in due where item.deadlineCame() { add(item) }
    }
}
