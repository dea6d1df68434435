import NIOCore

/// The waits' deadlines, earliest first (a binary min-heap), so that one timer serves every
/// waiter of an instance.
///
/// A timer per waiter cost a commit with 10,000 waiting 9 % of its server time: NIO cancels a
/// scheduled task by a linear search of its event loop's timers, under the lock every other
/// thread's `execute` takes, so waking n waiters cost n²/2 comparisons (issue 12,
/// docs/performance.md). Here a wait that ends early leaves its entry behind: `CommitWaiters`
/// skips it when `popDue` hands it back, and rebuilds the heap when such entries outnumber
/// the live ones.
struct WaitDeadlines {
    struct Entry {
        let at: NIODeadline
        let id: Int
    }

    private var heap: [Entry] = []

    var count: Int { heap.count }

    /// The earliest deadline held, live or not.
    var earliest: NIODeadline? { heap.first?.at }

    mutating func insert(_ entry: Entry) {
        heap.append(entry)
        var child = heap.count - 1
        while child > 0 {
            let parent = (child - 1) / 2
            guard heap[child].at < heap[parent].at else { break }
            heap.swapAt(child, parent)
            child = parent
        }
    }

    /// Removes and returns every entry due at `now`, earliest first.
    mutating func popDue(at now: NIODeadline) -> [Entry] {
        var due: [Entry] = []
        while let first = heap.first, first.at <= now {
            due.append(first)
            removeFirst()
        }
        return due
    }

    /// Drops the entries at the top that `isLive` rejects, so that `earliest` is a live one's.
    mutating func dropStale(keeping isLive: (Int) -> Bool) {
        while let first = heap.first, !isLive(first.id) { removeFirst() }
    }

    /// Keeps only the entries `isLive` accepts.
    mutating func rebuild(keeping isLive: (Int) -> Bool) {
        let live = heap.filter { isLive($0.id) }
        heap = []
        heap.reserveCapacity(live.count)
        for entry in live { insert(entry) }
    }

    private mutating func removeFirst() {
        let last = heap.removeLast()
        guard !heap.isEmpty else { return }
        heap[0] = last
        var parent = 0
        while true {
            let left = 2 * parent + 1, right = left + 1
            var smallest = parent
            if left < heap.count, heap[left].at < heap[smallest].at { smallest = left }
            if right < heap.count, heap[right].at < heap[smallest].at { smallest = right }
            guard smallest != parent else { return }
            heap.swapAt(parent, smallest)
            parent = smallest
        }
    }
}
