import PostgresNIO
import Synchronization

/// A request's work on a leased connection, watched for PostgreSQL that stopped answering.
///
/// PostgreSQL bounds a statement and a lock wait with its own `statement_timeout` and
/// `lock_timeout`, but only while it runs: a PostgreSQL frozen (a stalled disk, a paused VM, a
/// process stopped) answers nothing, and its kernel still acknowledges the bytes and the
/// keep-alive probes, so TCP cannot tell either. A request whose statement was in flight then
/// waited for as long as the freeze lasted, and so did `GET /ready`. Its `DeadlineQueue`
/// closes the connection of a lease still at work past `Database.answerLimit`: the statement
/// fails, the request is answered 503, and the pool opens a new connection.
///
/// A frozen PostgreSQL that comes back finds the connection closed and rolls its transaction
/// back, unless it had read the COMMIT already: that is the COMMIT cut off by a restart, which
/// a device's retry of the same seq resolves (docs/operations.md).
final class ConnectionLeaseWatch: Expiring {
    private enum State: UInt8 {
        case working, ended, expired
    }

    let connection: PostgresConnection
    private let state = Atomic<UInt8>(State.working.rawValue)

    init(_ connection: PostgresConnection) {
        self.connection = connection
    }

    var isPending: Bool { state.load(ordering: .acquiring) == State.working.rawValue }

    /// Closes the connection, unless the work ended first or PostgreSQL closed it already
    /// (its own timeout for a transaction left idle: that error tells the truer story).
    func expire() -> Bool {
        guard !connection.isClosed,
            state.compareExchange(expected: State.working.rawValue, desired: State.expired.rawValue, ordering: .acquiringAndReleasing).exchanged
        else { return false }
        connection.close().whenComplete { _ in }
        return true
    }

    /// The work ended. Returns whether the connection was closed under it first.
    func end() -> Bool {
        !state.compareExchange(expected: State.working.rawValue, desired: State.ended.rawValue, ordering: .acquiringAndReleasing).exchanged
    }
}
