import GRDB
import RevsyncWire

extension SyncEngine {
    /// Asks the server to answer when something is committed after the device's
    /// revision, or after `wait` with nothing (a long-poll: `POST /sync` with no
    /// change sets and `"wait"`; the server clamps the wait to its maximum), and
    /// applies the answer as any catch-up. `run()` calls this between rounds; an
    /// app with its own loop can too.
    ///
    /// A local transaction made during the wait, a call of `syncOnce()` or
    /// `bootstrap()`, and `close()` cancel the request (its connection is closed,
    /// so the server drops the waiter) and return `.interrupted`, as does a device
    /// with change sets pending or not bootstrapped: sync then. Holding the sync slot
    /// while waiting keeps the answer from racing a round; giving it up on demand
    /// keeps a long-poll from delaying anything.
    ///
    /// Failures are thrown as they come, without retrying (the caller backs off);
    /// cancelling the calling task cancels the request and throws `CancellationError`.
    public func waitForServerChanges(upTo wait: Duration) async throws -> LongPollOutcome {
        try checkOpen()
        let token = try requireToken()
        await acquireSyncSlot()
        defer { releaseSyncSlot() }
        try checkOpen()
        try Task.checkCancellation()
        // A wake from before this point is about work the outbox shows; one from now on interrupts.
        wakePending = false
        guard layout != nil, try await !needsSnapshot() else { return .interrupted }
        let (meta, pending) = try await database.writer.read { db in
            (try SQLiteRecordStore.readMeta(db), try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM revsync_outbox") ?? 0)
        }
        let maxRevision = meta.maxRevision
        // A transaction, a caller wanting the slot or close() while the outbox was read: no wait.
        guard pending == 0, !wakePending, syncWaiters.isEmpty, !closed else { return .interrupted }

        let request = SyncRequest(maxRevision: maxRevision, wait: max(0, wait.seconds), history: meta.history)
        let transport = self.transport
        // A task of its own, so that `interruptLongPoll()` can cancel the request without
        // cancelling the caller; it is awaited here, and cancelled with the caller.
        let call = Task { try await transport.sync(request, token: token) }
        longPoll = call
        longPollInterrupted = false
        let started = ContinuousClock.now
        let response: SyncResponse
        do {
            response = try await withTaskCancellationHandler {
                try await call.value
            } onCancel: {
                call.cancel()
            }
            longPoll = nil
        } catch {
            longPoll = nil
            if Task.isCancelled { throw CancellationError() }
            if longPollInterrupted { return .interrupted }
            throw error
        }
        // An answer that arrived even though the request was being cancelled is applied all the
        // same, unless the engine was closed meanwhile.
        let elapsed = ContinuousClock.now - started
        try checkOpen()
        // Of another history: thrown, and the next round is refused and loads a new snapshot.
        try ResponseApplier.checkHistory(of: response, to: request)
        var report = SyncReport()
        report.requests = 1
        let outcome = try await applyAnswer(response, to: request, token: token, report: &report)
        if outcome.more { report.absorb(try await performRound()) }
        guard report.maxRevision > maxRevision || report.receivedChangeSets > 0 || report.bootstrapped else {
            return .nothingNew(held: elapsed >= min(wait, .seconds(1)))
        }
        return .received(report)
    }

    /// Cancels the long-poll in flight, if any: the device has something to do.
    func interruptLongPoll() {
        guard let longPoll else { return }
        longPollInterrupted = true
        longPoll.cancel()
    }
}
