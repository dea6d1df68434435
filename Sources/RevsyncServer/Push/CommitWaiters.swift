import NIOCore
import ServiceLifecycle
import Synchronization

/// The requests of this instance waiting for a commit after their `maxRevision` (long-poll),
/// and the highest head the instance has heard of, which wakes them.
///
/// A waiter costs an entry here and a timer on an event loop: no task, no connection lease,
/// no buffer. The request's own task stays suspended on a continuation until one of four
/// things ends the wait: a head past its revision (`committed`), its time (`timedOut`), the
/// client closing the connection, or shutdown (`released`).
package final class CommitWaiters: Sendable {
    package enum Ending: Sendable, Equatable {
        /// Something was committed after the waiter's revision: read the log.
        case committed
        /// The wait ran out: the answer is empty.
        case timedOut
        /// Shutdown, or the client went away: answer now with what there is.
        case released
    }

    /// How a wait ended, and when it was ended (the wake-up, before the request's task runs again).
    package struct WaitResult: Sendable {
        package let ending: Ending
        package let at: ContinuousClock.Instant
    }

    private struct Waiter {
        let after: Int64
        let continuation: CheckedContinuation<WaitResult, Never>
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
            waiter.continuation.resume(returning: result)
        }
    }

    /// Waits until the head passes `revision`, `duration` passes, `clientGone` completes, the
    /// server shuts down gracefully or the task is cancelled, whichever comes first. A head
    /// already past `revision` (a commit between the caller's read and this call) ends it at once.
    package func wait(after revision: Int64, for duration: Duration, clientGone: EventLoopFuture<Void>? = nil) async -> WaitResult {
        let id = state.withLock { state in
            state.nextId += 1
            return state.nextId
        }
        return await withGracefulShutdownHandler {
            await withTaskCancellationHandler {
                await withCheckedContinuation { (continuation: CheckedContinuation<WaitResult, Never>) in
                    // Checked under the lock the handlers below take: either they ran before (and
                    // their flags show here) or they find the waiter.
                    let immediate: Ending? = state.withLock { state in
                        if state.closed || Task.isCancelled || Task.isShuttingDownGracefully { return .released }
                        if state.head > revision { return .committed }
                        state.waiters[id] = Waiter(after: revision, continuation: continuation)
                        changed(state.waiters.count)
                        return nil
                    }
                    if let immediate {
                        continuation.resume(returning: WaitResult(ending: immediate, at: .now))
                        return
                    }
                    let timer = timers.any().scheduleTask(in: .nanoseconds(duration.nanoseconds)) { [self] in
                        end(id, .timedOut)
                    }
                    let armed = state.withLock { state in
                        guard state.waiters[id] != nil else { return false }
                        state.waiters[id]?.timer = timer
                        return true
                    }
                    if !armed { timer.cancel() }
                    clientGone?.whenComplete { [self] _ in end(id, .released) }
                }
            } onCancel: { [self] in
                end(id, .released)
            }
        } onGracefulShutdown: { [self] in
            end(id, .released)
        }
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
            waiter.continuation.resume(returning: result)
        }
    }

    private func end(_ id: Int, _ ending: Ending) {
        let waiter: Waiter? = state.withLock { state in
            guard let waiter = state.waiters.removeValue(forKey: id) else { return nil }
            changed(state.waiters.count)
            return waiter
        }
        guard let waiter else { return }
        waiter.timer?.cancel()
        waiter.continuation.resume(returning: WaitResult(ending: ending, at: .now))
    }
}
