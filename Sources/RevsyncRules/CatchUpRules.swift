import RevsyncWire

/// The head revision and the oldest revision a device may still catch up from.
public struct LogState: Sendable, Hashable {
    public let head: Int64
    /// Change sets up to here are no longer in the log: a device below it needs a snapshot.
    public let horizon: Int64

    public init(head: Int64, horizon: Int64) {
        self.head = head
        self.horizon = horizon
    }
}

/// How much one answer may carry.
public struct CatchUpLimits: Sendable, Hashable {
    public let maxChangeSets: Int
    public let maxBytes: Int

    public init(maxChangeSets: Int, maxBytes: Int) {
        self.maxChangeSets = maxChangeSets
        self.maxBytes = maxBytes
    }
}

/// The rules of a catch-up: which `maxRevision` the server can answer, and where a page ends.
public enum CatchUpRules {
    /// A device's `maxRevision` must lie between the horizon and the head.
    public static func checkEnvelope(maxRevision: Int64, state: LogState) throws(SyncRefusal) {
        guard maxRevision <= state.head else {
            throw SyncRefusal(.revisionAhead, "maxRevision \(maxRevision) is above the server's head revision \(state.head)")
        }
        guard maxRevision >= state.horizon else {
            throw SyncRefusal(.snapshotRequired, "maxRevision \(maxRevision) is older than the retained log (from \(state.horizon)): bootstrap from GET /snapshot")
        }
    }

    /// A revision that neither the cache nor the log has: behind the horizon, the device needs a
    /// snapshot (when nothing was sent yet); above it, the page ends before the hole.
    public static func checkMissing(_ revision: Int64, horizon: Int64, pageIsEmpty: Bool) throws(SyncRefusal) {
        if pageIsEmpty, revision <= horizon {
            throw SyncRefusal(.snapshotRequired, "revision \(revision) is no longer in the log: bootstrap from GET /snapshot")
        }
    }

    /// The last revision a page after `revision` may reach: at most `maxChangeSets` of them, and not past `head`.
    public static func lastWanted(after revision: Int64, through head: Int64, limits: CatchUpLimits) -> Int64 {
        min(head, revision + Int64(limits.maxChangeSets))
    }
}

/// Fills one catch-up page as entries arrive in revision order: whole entries only, at
/// least one (a single huge entry is sent alone), then no more than the limits allow.
public struct CatchUpPager: Sendable {
    public let limits: CatchUpLimits
    public private(set) var count = 0
    public private(set) var bytes = 0
    /// An entry was refused: the log holds more than this page.
    public private(set) var full = false

    public init(limits: CatchUpLimits) { self.limits = limits }

    /// Whether the next entry, of `size` bytes, joins the page; after the first refusal, none does.
    public mutating func admit(size: Int) -> Bool {
        guard !full else { return false }
        if count >= limits.maxChangeSets || (count > 0 && bytes + size > limits.maxBytes) {
            full = true
            return false
        }
        count += 1
        bytes += size
        return true
    }

    /// Whether `count` consecutive entries of `size` bytes in all join the page together: only
    /// when each of them would join it one by one whatever their single sizes. Otherwise the
    /// caller offers them one by one; a refusal here ends nothing.
    public mutating func admitRun(count runCount: Int, size: Int) -> Bool {
        guard !full, count + runCount <= limits.maxChangeSets, bytes + size <= limits.maxBytes else { return false }
        count += runCount
        bytes += size
        return true
    }
}
