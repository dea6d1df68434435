import NIOCore
import PostgresNIO
import Synchronization

/// A request's work on a leased connection, watched for PostgreSQL that stopped answering.
///
/// PostgreSQL bounds a statement and a lock wait with its own `statement_timeout` and
/// `lock_timeout`, but only while it runs: a PostgreSQL frozen (a stalled disk, a paused VM, a
/// process stopped) answers nothing, and its kernel still acknowledges the bytes and the
/// keep-alive probes, so TCP cannot tell either. A request whose statement was in flight then
/// waited for as long as the freeze lasted, and so did `GET /ready`.
///
/// Its `DeadlineQueue` looks at the work every timeout. Once PostgreSQL has sent nothing on the
/// connection for `silenceLimit` (`Database.answerLimit`) since the lease began, the connection
/// is closed: the statement fails, the request is answered 503, and the pool opens a new
/// connection. Work that PostgreSQL keeps answering (a large batch, statement after statement)
/// is never cut, however long it runs. The last answer's time comes from the connection's
/// `HeardStamp`; without one (a PostgresNIO that hides the channel), from the lease's start.
///
/// A frozen PostgreSQL that comes back finds the connection closed and rolls its transaction
/// back, unless it had read the COMMIT already: that is the COMMIT cut off by a restart, which
/// a device's retry of the same seq resolves (docs/operations.md).
final class ConnectionLeaseWatch: Expiring {
    private enum State: UInt8 {
        case working, ended, expired
    }

    let connection: PostgresConnection
    private let started: NIODeadline
    private let silenceLimit: Duration
    private let heard: HeardStamp?
    private let state = Atomic<UInt8>(State.working.rawValue)

    init(_ connection: PostgresConnection, silenceLimit: Duration, heard: HeardStamp?) {
        self.connection = connection
        self.started = .now()
        self.silenceLimit = silenceLimit
        self.heard = heard
    }

    var isPending: Bool { state.load(ordering: .acquiring) == State.working.rawValue }

    /// Closes the connection once PostgreSQL has been silent on it for `silenceLimit`; looks
    /// again one period later while it has not. Does nothing once the work ended, or when
    /// PostgreSQL closed the connection already (its own timeout for a transaction left idle:
    /// that error tells the truer story).
    func deadlineCame() -> Bool {
        guard isPending, !connection.isClosed else { return false }
        let quietSince = max(started, heard?.last ?? started)
        guard NIODeadline.now() - quietSince >= .nanoseconds(silenceLimit.nanoseconds) else { return true }
        guard state.compareExchange(expected: State.working.rawValue, desired: State.expired.rawValue, ordering: .acquiringAndReleasing).exchanged
        else { return false }
        connection.close().whenComplete { _ in }
        return false
    }

    /// The work ended. Returns whether the connection was closed under it first.
    func end() -> Bool {
        !state.compareExchange(expected: State.working.rawValue, desired: State.ended.rawValue, ordering: .acquiringAndReleasing).exchanged
    }
}
