import NIOCore
import Synchronization

/// The requests of this instance waiting for a commit after their `maxRevision` (long-poll),
/// and the highest head the instance has heard of, which wakes them.
///
/// A waiter is an entry here, a timer on an event loop and the closure that answers it: no
/// task, no connection lease, no buffer. Its closure is called once, with one of four endings:
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
        var timer: Scheduled<Void>?
    }

    private struct State {
        var head: Int64 = 0
        var waiters: [Int: Waiter] = [:]
        var nextId = 0
        var closed = false
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
        for waiter in woken {
            waiter.timer?.cancel()
            waiter.resume(result)
        }
    }

    /// Waits until the head passes `revision`, `duration` passes, `release` names the ticket or
    /// the server shuts down, whichever comes first, and then calls `resume` once. A head already
    /// past `revision` (a commit between the caller's read and this call), or a registry already
    /// closed, calls it at once, before this returns.
    @discardableResult
    package func park(after revision: Int64, for duration: Duration, resume: @escaping @Sendable (WaitResult) -> Void) -> Ticket {
        let ticket = Ticket(id: state.withLock { state in
            state.nextId += 1
            return state.nextId
        })
        let immediate: Ending? = state.withLock { state in
            if state.closed { return .released }
            if state.head > revision { return .committed }
            state.waiters[ticket.id] = Waiter(after: revision, resume: resume)
            changed(state.waiters.count)
            return nil
        }
        if let immediate {
            resume(WaitResult(ending: immediate, at: .now))
            return ticket
        }
        let timer = timers.any().scheduleTask(in: .nanoseconds(duration.nanoseconds)) { [self] in
            end(ticket, .timedOut)
        }
        // Ended meanwhile (a wake-up on another thread): the timer has nothing left to end.
        let armed = state.withLock { state in
            guard state.waiters[ticket.id] != nil else { return false }
            state.waiters[ticket.id]?.timer = timer
            return true
        }
        if !armed { timer.cancel() }
        return ticket
    }

    /// Ends one wait now, as `released`, if it has not ended yet.
    package func release(_ ticket: Ticket) {
        end(ticket, .released)
    }

    /// Ends every wait at once and every later one before it starts (shutdown).
    package func close() {
        let all: [Waiter] = state.withLock { state in
            state.closed = true
            defer {
                state.waiters = [:]
                changed(0)
            }
            return Array(state.waiters.values)
        }
        let result = WaitResult(ending: .released, at: .now)
        for waiter in all {
            waiter.timer?.cancel()
            waiter.resume(result)
        }
    }

    private func end(_ ticket: Ticket, _ ending: Ending) {
        let waiter: Waiter? = state.withLock { state in
            guard let waiter = state.waiters.removeValue(forKey: ticket.id) else { return nil }
            changed(state.waiters.count)
            return waiter
        }
        guard let waiter else { return }
        waiter.timer?.cancel()
        waiter.resume(WaitResult(ending: ending, at: .now))
    }
}
