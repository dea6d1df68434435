import PostgresNIO
import Synchronization

/// A pooled connection lent from the task that leases it to the task that waits for it.
///
/// `Database.withConnection` runs its body in the caller's task: a snapshot's body writes to
/// what cannot be sent to another task (a file being written), and no request pays for a
/// task of its own. PostgresNIO offers a lease only as a closure, so a child task leases and
/// lends the connection here; the caller gives up if none came within its deadline (the
/// child's lease request is then cancelled) and gives the connection back when its body has
/// ended, which ends the child's closure and returns the connection to the pool.
final class ConnectionHandoff: Expiring {
    private enum State {
        case waiting(CheckedContinuation<PostgresConnection?, any Error>?)
        case lent(PostgresConnection)
        /// Lent, and the leasing task waits for it back (the caller may not have taken it yet).
        case held(PostgresConnection, CheckedContinuation<Void, Never>)
        /// The caller stopped waiting: its deadline (no error), or the lease failed. A
        /// connection lent late goes straight back.
        case abandoned((any Error)?)
        case returned
    }

    private let state = Mutex(State.waiting(nil))

    /// The caller: the connection, or nil once `expire()` came first.
    func connection() async throws -> PostgresConnection? {
        try await withCheckedThrowingContinuation { continuation in
            let lent: Result<PostgresConnection?, any Error>? = state.withLock { state in
                switch state {
                case .waiting:
                    state = .waiting(continuation)
                    return .none
                case .lent(let connection), .held(let connection, _):
                    return .some(.success(connection))
                case .abandoned(let error?):
                    return .some(.failure(error))
                case .abandoned(nil), .returned:
                    return .some(.success(nil))
                }
            }
            if let lent { continuation.resume(with: lent) }
        }
    }

    /// The leasing task: hands `connection` over and waits until it is given back. Returns
    /// at once when the caller has stopped waiting.
    func lend(_ connection: PostgresConnection) async {
        let waiter: CheckedContinuation<PostgresConnection?, any Error>?? = state.withLock { state in
            guard case .waiting(let waiter) = state else { return .none }
            state = .lent(connection)
            return .some(waiter)
        }
        guard let waiter else { return }
        waiter?.resume(returning: connection)
        await withCheckedContinuation { (held: CheckedContinuation<Void, Never>) in
            let returned = state.withLock { state in
                guard case .lent(let connection) = state else { return true }
                state = .held(connection, held)
                return false
            }
            if returned { held.resume() }
        }
    }

    /// Whether the caller still waits for a connection (none lent, no deadline, no failure).
    var isPending: Bool {
        state.withLock { state in
            if case .waiting = state { return true }
            return false
        }
    }

    /// The deadline: the caller stops waiting unless a connection was lent already.
    /// Returns whether it did stop it.
    func expire() -> Bool {
        finishWaiting(with: nil)
    }

    func deadlineCame() -> Bool {
        _ = expire()
        return false
    }

    /// The lease failed before a connection was lent: the caller gets `error`.
    func fail(_ error: any Error) {
        _ = finishWaiting(with: error)
    }

    /// The caller's body has ended: the leasing task may return the connection.
    func giveBack() {
        let held: CheckedContinuation<Void, Never>? = state.withLock { state in
            defer { state = .returned }
            if case .held(_, let held) = state { return held }
            return nil
        }
        held?.resume()
    }

    private func finishWaiting(with error: (any Error)?) -> Bool {
        let finished: CheckedContinuation<PostgresConnection?, any Error>?? = state.withLock { state in
            guard case .waiting(let waiter) = state else { return .none }
            state = .abandoned(error)
            return .some(waiter)
        }
        guard let finished else { return false }
        if let error { finished?.resume(throwing: error) } else { finished?.resume(returning: nil) }
        return true
    }
}
