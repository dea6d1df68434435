/// How `SyncEngine.waitForServerChanges(upTo:)` ended.
public enum LongPollOutcome: Sendable, Hashable {
    /// The server had new change sets: they were applied as any catch-up (and the
    /// rest fetched while the server said `more`).
    case received(SyncReport)
    /// The server answered with nothing new. `held` is false when it answered at
    /// once (in less than a second, or than the wait if shorter): a server that does
    /// not hold requests, so asking again at once would be a busy loop.
    case nothingNew(held: Bool)
    /// Ended before or without an answer, nothing applied, because the device
    /// should sync now: it has change sets to send (a local transaction made
    /// during the wait cancels the request), `syncOnce()` or `bootstrap()` was
    /// called, the engine was closed, or it is not bootstrapped yet.
    case interrupted
}
