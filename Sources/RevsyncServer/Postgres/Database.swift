import Logging
import Synchronization
import NIOCore
import PostgresNIO

/// The server's PostgreSQL access: a client pool plus the helpers every store uses.
///
/// Every query's rows are consumed, even when nothing is read from them: a
/// query's error arrives while its rows stream, and an unread error inside a
/// transaction turns the COMMIT into a silent rollback (PITFALLS.md).
public struct Database: Sendable {
    public let client: PostgresClient
    let logger: Logger
    let timeout: Duration
    /// Connections leased so far: tests use it to prove a path makes no query at all.
    public let leases = LeaseCounter()
    /// Every wait's deadline for a connection, on one timer.
    let waitDeadlines: DeadlineQueue<ConnectionHandoff>
    /// Every request's lease, looked at every `timeout`, closed once PostgreSQL was silent on
    /// it for `answerLimit`.
    let leaseWatches: DeadlineQueue<ConnectionLeaseWatch>
    /// Gives each connection its TCP keep-alive and its `HeardStamp` on its first lease.
    let setup: ConnectionSetup
    /// Called each time a request's connection is closed for PostgreSQL leaving it unanswered (a metric).
    let onUnanswered: @Sendable () -> Void

    public init(client: PostgresClient, logger: Logger, timeout: Duration) {
        self.init(client: client, logger: logger, timeout: timeout, keepAlive: TCPKeepAlive())
    }

    /// - Parameters:
    ///   - keepAlive: how each connection finds a silently dead path (`TCPKeepAlive`); nil keeps
    ///     the system's TCP settings.
    ///   - onUnanswered: called each time `ConnectionLeaseWatch` closes a request's connection.
    package init(
        client: PostgresClient, logger: Logger, timeout: Duration, keepAlive: TCPKeepAlive?, onUnanswered: @escaping @Sendable () -> Void = {}
    ) {
        self.client = client
        self.onUnanswered = onUnanswered
        self.logger = logger
        self.timeout = timeout
        self.waitDeadlines = DeadlineQueue(limit: timeout)
        self.leaseWatches = DeadlineQueue(limit: timeout)
        self.setup = ConnectionSetup(keepAlive: keepAlive, logger: logger)
    }

    /// How long PostgreSQL may send nothing on a request's connection while the request's work
    /// is under way (`ConnectionLeaseWatch`): three times the timeout. While PostgreSQL runs,
    /// its own limits answer a statement or a lock wait within the timeout, and end a
    /// transaction idle between two statements within twice that; past it, PostgreSQL has
    /// stopped answering. The watch looks every timeout, so it closes the connection within
    /// three to four times the timeout of PostgreSQL's last word.
    static func answerLimit(_ timeout: Duration) -> Duration { timeout * 3 }

    /// How long a lease of a connection may take.
    enum LeaseLimits: Sendable {
        /// A request's work: a connection within the timeout, and PostgreSQL silent on it
        /// no longer than `answerLimit` (or the connection is closed under it).
        case request
        /// Reads at a client's pace (a snapshot's): a connection within the timeout, the
        /// work unbounded.
        case stream
        /// Migrations: a connection whenever one comes, the work unbounded.
        case unbounded
    }

    /// Runs `body` on one connection, in the caller's task. Waiting longer than the timeout for
    /// a connection, or PostgreSQL being unreachable, becomes 503. Once `body` has its
    /// connection, PostgreSQL's own `statement_timeout` and `lock_timeout` bound it (set on
    /// every connection): a timer here could answer 503 for a COMMIT that went through. Only a
    /// PostgreSQL that stopped answering altogether has the connection closed under a request
    /// (silent for `answerLimit`).
    func withConnection<T: Sendable>(
        limits: LeaseLimits = .request, _ body: (PostgresConnection) async throws -> T
    ) async throws -> T {
        leases.increment()
        do {
            return try await withConnectionLent(limits, body)
        } catch let error as PSQLError {
            guard let reason = error.unavailability(timeout: timeout) else { throw error }
            throw StoreError.unavailable(reason)
        }
    }

    /// Runs `body` in a transaction with the given isolation; rolls back when it throws.
    func transaction<T: Sendable>(
        _ isolation: String = "READ COMMITTED", limits: LeaseLimits = .request,
        _ body: (PostgresConnection) async throws -> T
    ) async throws -> T {
        let logger = self.logger
        return try await withConnection(limits: limits) { connection in
            try await connection.inTransaction(isolation, logger, body)
        }
    }

    /// Lifts the connection's limits on a statement and on the wait between two (`DatabaseURL`)
    /// for the rest of its transaction; `locks`: on lock waits too.
    static func unlimitedTransaction(locks: Bool) -> PostgresQuery {
        PostgresQuery(unsafeSQL: """
            SELECT set_config('statement_timeout', '0', true), set_config('idle_in_transaction_session_timeout', '0', true)\(
                locks ? ", set_config('lock_timeout', '0', true)" : "")
            """)
    }

    /// What a failed lease becomes. PostgresNIO's own errors are `PSQLError`s (mapped by
    /// `withConnection`), but its pool fails leases with `ConnectionPoolError` once it has
    /// been refused connections for a minute (its circuit breaker): every request then got
    /// 500 for as long as PostgreSQL stayed away. Cancellation stays itself.
    static func leaseFailure(_ error: any Error) -> any Error {
        if error is PSQLError || error is CancellationError || error is StoreError { return error }
        return StoreError.unavailable("PostgreSQL is unreachable: \(error)")
    }

    /// A transaction for streaming its reads at the reader's pace: no statement deadline once
    /// it has its connection. `body` runs in the caller's task, as every body here does, so it
    /// may capture what cannot be sent to another (a file being written).
    func streamingTransaction<T: Sendable>(_ isolation: String, _ body: (PostgresConnection) async throws -> T) async throws -> T {
        try await transaction(isolation, limits: .stream) { connection in
            // A client reads at its own pace: no time limit on a statement, nor between two.
            try await connection.run(Self.unlimitedTransaction(locks: false), logger)
            return try await body(connection)
        }
    }

    /// Runs `body` in the caller's task on a connection a child task leases (`ConnectionHandoff`),
    /// giving up when none was lent within `timeout` (`waitDeadlines`), unless `limits` is `.unbounded`.
    /// Once it has its connection, `body` runs to its end: its result, or its error, is the
    /// answer; a request's body is watched (`leaseWatches`).
    private func withConnectionLent<T: Sendable>(_ limits: LeaseLimits, _ body: (PostgresConnection) async throws -> T) async throws -> T {
        let handoff = ConnectionHandoff(), client = self.client
        return try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                do {
                    try await client.withConnection { connection in await handoff.lend(connection) }
                } catch {
                    handoff.fail(Self.leaseFailure(error))
                }
            }
            if limits != .unbounded { waitDeadlines.add(handoff) }
            // On every way out, before the group waits for its tasks: the leasing one holds
            // its connection until it is given back.
            defer { handoff.giveBack() }
            guard let connection = try await handoff.connection() else {
                // Only a deadline ends the wait without a connection. Cancels the lease
                // request still queued in the pool.
                group.cancelAll()
                throw StoreError.unavailable("no PostgreSQL connection became free within \(timeout)")
            }
            let heard = await setup.prepare(connection)
            let watch = limits == .request ? ConnectionLeaseWatch(connection, silenceLimit: Self.answerLimit(timeout), heard: heard) : nil
            if let watch { leaseWatches.add(watch) }
            let result: T
            do {
                result = try await body(connection)
            } catch {
                // Closed under the work: say why, rather than what the closed connection said.
                // Work that succeeded is answered as such, however late.
                guard watch?.end() == true else { throw error }
                onUnanswered()
                let limit = Self.answerLimit(timeout)
                logger.error("PostgreSQL answered nothing for \(limit) (frozen, or its storage stalled?): a request's connection was closed and the request answered 503")
                throw StoreError.unavailable("PostgreSQL did not answer within \(limit): is it frozen, or its storage stalled?")
            }
            _ = watch?.end()
            group.cancelAll()
            return result
        }
    }
}

// Public: the simulator's verdict, the bench and the tests run their SQL through these too.
extension PostgresConnection {
    /// BEGIN, `body`, COMMIT; ROLLBACK when `body` throws.
    /// `isolation` follows BEGIN ISOLATION LEVEL, e.g. "READ COMMITTED" or "REPEATABLE READ READ ONLY".
    public nonisolated(nonsending) func inTransaction<T>(
        _ isolation: String, _ logger: Logger, _ body: (PostgresConnection) async throws -> T
    ) async throws -> T {
        try await run("BEGIN ISOLATION LEVEL \(unescaped: isolation)", logger)
        do {
            let result = try await body(self)
            try await run("COMMIT", logger)
            return result
        } catch {
            try? await run("ROLLBACK", logger)
            throw error
        }
    }

    /// Runs a statement and reads (and drops) its rows so that its error, if any, is thrown here.
    public func run(_ query: PostgresQuery, _ logger: Logger) async throws {
        _ = try await openQuery(query, logger).collect()
    }

    /// Runs a query and returns all its rows.
    public func rows(_ query: PostgresQuery, _ logger: Logger) async throws -> [PostgresRow] {
        try await openQuery(query, logger).collect()
    }

    /// Sends `query`, unless the connection is closed already: PostgresNIO 1.33.2 writes a
    /// query to a closed connection and never answers it (the write's failure is dropped), so
    /// a transaction whose connection PostgreSQL closed between two statements (a restart)
    /// would wait for ever. A snapshot file's build did, mid-way, after a restart in a soak.
    public func openQuery(_ query: PostgresQuery, _ logger: Logger) async throws -> PostgresRowSequence {
        try ensureOpen()
        return try await self.query(query, logger: logger)
    }

    /// Throws unless the connection is open: every statement is sent after it (`openQuery`).
    /// PostgreSQL also ends a session whose transaction waited too long for its next statement
    /// (`idle_in_transaction_session_timeout`), and the keep-alive drops one whose path died.
    /// Called from the connection's event loop (the write path's tasks run there), nothing can
    /// close it between the check and the write.
    public func ensureOpen() throws {
        guard !isClosed else {
            throw StoreError.unavailable("PostgreSQL closed the connection (a restart, or a transaction left idle too long) before the next statement")
        }
    }
}

extension PSQLError {
    /// The SQLSTATE of a server error, e.g. "23503" for a foreign key violation.
    var sqlState: String? { serverInfo?[.sqlState] }

    /// Why PostgreSQL cannot serve the request now, worded for its `503`; nil when the error
    /// is the request's (a rejection, mapped by the rules) or a bug (`500`). Nothing of the
    /// request committed in any of these, and a retry may pass:
    /// - the connection failed or could not be made;
    /// - PostgreSQL ended the session: a shutdown or restart, a backend terminated by an
    ///   operator, a database not accepting connections yet (class 57P), a connection
    ///   exception (class 08). A statement in flight during a restart got 500 before;
    /// - its own `statement_timeout` or `lock_timeout` (`57014`, `55P03`), set to the timeout;
    /// - it cannot do the work now, through no fault of the request: lacking resources (class
    ///   53: a full disk, no memory, too many connections), an I/O error (class 58), a server
    ///   gone read-only (`25006`: a standby after a switchover, or a managed service that
    ///   stops writes when its storage fills), a session or transaction timeout an operator
    ///   set (`25P03`, `25P04`). The operator must act; the device retries.
    func unavailability(timeout: Duration) -> String? {
        if [.connectionError, .serverClosedConnection, .clientClosedConnection, .poolClosed, .uncleanShutdown].contains(code) {
            return "PostgreSQL is unreachable: \(code)"
        }
        guard let sqlState else { return nil }
        let message = serverInfo?[.message] ?? sqlState
        if sqlState.hasPrefix("57P") || sqlState.hasPrefix("08") { return "PostgreSQL ended the connection (a restart?): \(message)" }
        if sqlState == "57014" || sqlState == "55P03" { return "PostgreSQL did not finish within \(timeout): \(serverInfo?[.message] ?? "timeout")" }
        if sqlState.hasPrefix("53") || sqlState.hasPrefix("58") || ["25006", "25P03", "25P04"].contains(sqlState) {
            return "PostgreSQL cannot write now: \(message)"
        }
        return nil
    }
}

extension Error {
    /// The SQLSTATE of a PostgreSQL error, looking through transaction wrappers.
    var sqlState: String? {
        if let error = self as? PSQLError { return error.sqlState }
        if let error = self as? PostgresTransactionError { return (error.closureError as? PSQLError)?.sqlState }
        return nil
    }
}

/// A thread-safe count of database connection leases.
public final class LeaseCounter: Sendable {
    private let count = Atomic<Int>(0)

    public init() {}

    func increment() { count.add(1, ordering: .relaxed) }

    public var value: Int { count.load(ordering: .relaxed) }
}
