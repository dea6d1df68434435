import NIOCore
import Synchronization

/// The requests of this instance waiting for a commit after their `maxRevision` (long-poll),
/// and the highest head the instance has heard of, which wakes them.
///
/// A waiter is an entry here, its deadline in `WaitDeadlines` and the closure that answers it:
/// no task, no connection lease, no buffer, no timer of its own (one timer, at the earliest
/// deadline, serves them all). Its closure is called once, with one of four endings:
/// a head past its revision (`committed`), its time (`timedOut`), `release` (the client went
/// away, or its connection is closing) or `close` (shutdown).
package final class CommitWaiters: Sendable {
    package enum Ending: Sendable, Equatable {
        /// Something was committed after the waiter's revision: read the log.
        case committed
        /// The wait ran out: the answer is empty.
        case timedOut
        /// Shutdown, or the client went away: answer now with what there is.
        case released
    }

    /// How a wait ended, and when it was ended (the wake-up, before its answer is read).
    package struct WaitResult: Sendable {
        package let ending: Ending
        package let at: ContinuousClock.Instant
    }

    /// Names one waiter, for `release`.
    package struct Ticket: Sendable, Hashable {
        fileprivate let id: Int
    }

    private struct Waiter {
        let after: Int64
        let resume: @Sendable (WaitResult) -> Void
    }

    /// Names the line of revisions waits are parked against: a new one starts at every
    /// `rewind`. A request reads the log, then parks; one that read the old line and parks after
    /// the rewind ended the others would otherwise wait for a revision of the old line.
    package struct Line: Sendable, Equatable {
        fileprivate let number: Int
    }

    private struct State {
        var head: Int64 = 0
        var line = 0
        var waiters: [Int: Waiter] = [:]
        var nextId = 0
        var closed = false
        var deadlines = WaitDeadlines()
        /// The one timer, due at `deadlines.earliest` when it was set.
        var timer: (at: NIODeadline, task: Scheduled<Void>, generation: Int)?
        /// Tells the current timer from one replaced too late to be cancelled.
        var timerGeneration = 0
    }

    private let state = Mutex(State())
    private let timers: any EventLoopGroup
    private let changed: @Sendable (_ waiting: Int) -> Void

    /// - Parameters:
    ///   - timers: where the waits' timers run (the server's event loops).
    ///   - changed: told the number of waiters whenever it changes (a gauge), under the registry's
    ///     lock, so that the last count told is the current one.
    package init(timers: any EventLoopGroup, changed: @escaping @Sendable (_ waiting: Int) -> Void = { _ in }) {
        self.timers = timers
        self.changed = changed
    }

    /// The highest head heard of.
    package var head: Int64 { state.withLock { $0.head } }

    /// The line of revisions now: read before the log is read, given to `park`.
    package var line: Line { state.withLock { Line(number: $0.line) } }

    /// Requests waiting now.
    package var count: Int { state.withLock { $0.waiters.count } }

    /// Raises the head (a lower one is ignored: messages arrive out of order) and wakes every
    /// waiter behind it, all with one wake-up instant.
    package func advance(to head: Int64) {
        let woken: [Waiter] = state.withLock { state in
            guard head > state.head else { return [] }
            state.head = head
            guard !state.waiters.isEmpty else { return [] }
            var woken: [Waiter] = []
            state.waiters = state.waiters.filter { _, waiter in
                guard waiter.after < head else { return true }
                woken.append(waiter)
                return false
            }
            if !woken.isEmpty { changed(state.waiters.count) }
            return woken
        }
        guard !woken.isEmpty else { return }
        let result = WaitResult(ending: .committed, at: .now)
        for waiter in woken { waiter.resume(result) }
    }

    /// Waits until the head passes `revision`, `duration` passes, `release` names the ticket or
    /// the server shuts down, whichever comes first, and then calls `resume` once. A head already
    /// past `revision` (a commit between the caller's read and this call), a registry already
    /// closed, or a rewind since `line` was read (`released`: the revision may be of the old
    /// line) calls it at once, before this returns.
    /// - Parameter line: `line` as read before the read of the log that found nothing after
    ///   `revision`; nil: the current one.
    @discardableResult
    package func park(
        after revision: Int64, for duration: Duration, line: Line? = nil, resume: @escaping @Sendable (WaitResult) -> Void
    ) -> Ticket {
        let deadline = NIODeadline.now() + .nanoseconds(duration.nanoseconds)
        let (ticket, immediate): (Ticket, Ending?) = state.withLock { state in
            state.nextId += 1
            let ticket = Ticket(id: state.nextId)
            if state.closed { return (ticket, .released) }
            if let line, line.number != state.line { return (ticket, .released) }
            if state.head > revision { return (ticket, .committed) }
            state.waiters[ticket.id] = Waiter(after: revision, resume: resume)
            state.deadlines.insert(.init(at: deadline, id: ticket.id))
            changed(state.waiters.count)
            armTimer(&state)
            return (ticket, nil)
        }
        if let immediate { resume(WaitResult(ending: immediate, at: .now)) }
        return ticket
    }

    /// The database went back (its history id was renewed): the head falls to `head`, and every
    /// wait ends now, as `released`. A waiter of the old line waits for a revision the new line
    /// may not reach for long, and its answer now names the new id, so that its device loads a
    /// new snapshot at once. Later waits park against the new head: the old one, kept, would
    /// wake them at once, again and again, until the new line passed it.
    /// A request that read the old line before this and parks after it ends at once too (`line`).
    package func rewind(to head: Int64) {
        endAll { state in
            state.head = head
            state.line += 1
        }
    }

    /// Ends one wait now, as `released`, if it has not ended yet.
    package func release(_ ticket: Ticket) {
        end(ticket, .released)
    }

    /// Ends every wait at once and every later one before it starts (shutdown).
    package func close() {
        endAll { $0.closed = true }
    }

    /// Ends every wait now, as `released`, after `change` under the same lock.
    private func endAll(_ change: (inout State) -> Void) {
        let all: [Waiter] = state.withLock { state in
            change(&state)
            let all = Array(state.waiters.values)
            state.waiters = [:]
            state.deadlines = WaitDeadlines()
            state.timer?.task.cancel()
            state.timer = nil
            changed(0)
            return all
        }
        let result = WaitResult(ending: .released, at: .now)
        for waiter in all { waiter.resume(result) }
    }

    private func end(_ ticket: Ticket, _ ending: Ending) {
        let waiter: Waiter? = state.withLock { state in
            guard let waiter = state.waiters.removeValue(forKey: ticket.id) else { return nil }
            changed(state.waiters.count)
            return waiter
        }
        waiter?.resume(WaitResult(ending: ending, at: .now))
    }

    /// Ends the waits whose deadline has come (the timer), then sets it for the next one.
    private func timerFired(_ generation: Int) {
        let due: [Waiter] = state.withLock { state in
            if state.timer?.generation == generation { state.timer = nil }
            var due: [Waiter] = []
            for entry in state.deadlines.popDue(at: .now()) {
                if let waiter = state.waiters.removeValue(forKey: entry.id) { due.append(waiter) }
            }
            if !due.isEmpty { changed(state.waiters.count) }
            armTimer(&state)
            return due
        }
        let result = WaitResult(ending: .timedOut, at: .now)
        for waiter in due { waiter.resume(result) }
    }

    /// Points the timer at the earliest live deadline (under the lock). Waits ended early leave
    /// their deadlines behind; once they outnumber the live ones, the heap is rebuilt without them.
    private func armTimer(_ state: inout State) {
        let waiters = state.waiters
        if state.deadlines.count > 2 * waiters.count + 64 {
            state.deadlines.rebuild { waiters[$0] != nil }
        } else {
            state.deadlines.dropStale { waiters[$0] != nil }
        }
        guard let earliest = state.deadlines.earliest else {
            state.timer?.task.cancel()
            state.timer = nil
            return
        }
        if let timer = state.timer, timer.at <= earliest { return }
        // NIO cancels a task by searching its loop's timers, but this is one timer, replaced
        // only when a shorter wait arrives.
        state.timer?.task.cancel()
        state.timerGeneration += 1
        let generation = state.timerGeneration
        let task = timers.any().scheduleTask(deadline: earliest) { [self] in timerFired(generation) }
        state.timer = (earliest, task, generation)
    }
}
