import RevsyncRules
import Synchronization

/// The database's history id as this instance last read it (`HistoryRules`), and what it
/// needs to notice that the database went back: the highest revision it saw committed or read,
/// and a rewind its own commits revealed, until `HistoryWatch` renews the id.
package final class DatasetHistory: Sendable {
    private struct State {
        var id: String?
        /// When the database set `id`.
        var since = HistorySince(microseconds: nil)
        /// When this instance took `id` in place of another (nil: it held none before).
        var tookIdAt: ContinuousClock.Instant?
        /// Counts the ids this instance took: tells a mark made under an earlier one.
        var line = 0
        /// The ids this instance held and replaced, the latest last (at most `replacedKept`).
        var replaced: [String] = []
        var highestSeen: Int64 = 0
        /// A batch of this instance's took revisions from `first` on, at most `highest`, which
        /// it had seen committed or read before: the database went back.
        var rewind: (first: Int64, highest: Int64)?
    }

    private let state: Mutex<State>
    /// Each restore replaces one or two ids: a few are plenty, and a request naming an older
    /// one still gets its answer from a read of the database.
    static let replacedKept = 8

    /// - Parameter id: nil until read from the database (requests are then not checked).
    package init(id: String? = nil) { state = Mutex(State(id: id)) }

    /// The id answers carry and requests are checked against; nil before the first read.
    package var id: String? { state.withLock { $0.id } }

    /// When the database set the id held (unknown before the first read, or for an id set
    /// before that was recorded).
    var since: HistorySince { state.withLock { $0.since } }

    /// When this instance took the id it holds in place of another, after dropping what it
    /// kept of that line; nil while it holds the first it read.
    var tookIdAt: ContinuousClock.Instant? { state.withLock { $0.tookIdAt } }

    /// What this instance held and had seen at one moment, read together.
    struct Mark: Sendable {
        let id: String?
        let since: HistorySince
        /// The highest revision this instance saw committed or read, for a comparison with a
        /// read (or a batch) that starts after the mark: it must see at least this much.
        let highestSeen: Int64
        let line: Int
    }

    /// What this instance holds and has seen now, for a read or a batch that starts after it.
    var mark: Mark {
        state.withLock { Mark(id: $0.id, since: $0.since, highestSeen: $0.highestSeen, line: $0.line) }
    }

    /// Counts the ids this instance took: a check that began under another line adopts nothing.
    var line: Int { state.withLock { $0.line } }

    /// Whether this instance held `id` and replaced it. Such an id is old for good: no check
    /// adopts it again (an older id a restore brings back is renewed, `HistoryRules.isOlderLine`).
    func replacedEarlier(_ id: String) -> Bool {
        state.withLock { $0.replaced.contains(id) }
    }

    /// The highest revision this instance saw committed or read.
    var highestSeen: Int64 { state.withLock { $0.highestSeen } }

    /// A batch this instance committed, as revisions `first...last`, that started after `before`.
    /// A batch numbered at or below what was seen then reveals a database that went back, unless
    /// the instance took another id meanwhile: the renewal came after the database went back
    /// (it read the database as it is now), and the batch's numbers are of the new line.
    func committed(first: Int64, last: Int64, before: Mark) {
        state.withLock { state in
            if first <= before.highestSeen, before.line == state.line, state.rewind == nil {
                state.rewind = (first, before.highestSeen)
            }
            state.highestSeen = max(state.highestSeen, last)
        }
    }

    /// The rewind a commit revealed, if any, for the watch to renew the id.
    var rewind: (first: Int64, highest: Int64)? { state.withLock { $0.rewind } }

    /// The id and head the database holds now. `renewed`: the id was renewed after a rewind,
    /// so the highest revision seen starts again from `head`.
    func adopt(id: String, since: HistorySince, head: Int64, renewed: Bool = false) {
        state.withLock { state in
            if state.id != id {
                state.line += 1
                // The first read replaces no line: a cache found ahead before it (at start) still counts.
                if let held = state.id {
                    state.tookIdAt = .now
                    state.replaced.append(held)
                    if state.replaced.count > Self.replacedKept { state.replaced.removeFirst() }
                }
                state.replaced.removeAll { $0 == id }
            }
            state.id = id
            state.since = since
            if renewed {
                state.highestSeen = head
                state.rewind = nil
            } else {
                state.highestSeen = max(state.highestSeen, head)
            }
        }
    }
}
