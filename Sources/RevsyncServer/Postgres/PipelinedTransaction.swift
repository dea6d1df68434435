import Logging
import NIOCore
import PostgresNIO
import Synchronization

/// A batch's transaction, whose BEGIN rides along with its first statement: it is queued on
/// the connection ahead of it, and no task waits for its answer alone. PostgresNIO sends a
/// connection's next query from its event loop as soon as the one before has answered, so
/// BEGIN costs PostgreSQL's round trip but none of the task wake-ups that, on a busy
/// machine, take most of a round trip's time.
///
/// PostgreSQL runs a connection's messages in order: a statement queued behind BEGIN runs
/// inside the transaction.
///
/// Tried and dropped: `SET LOCAL plan_cache_mode = force_generic_plan` queued the same way.
/// It took PostgreSQL's planning off a lone writer's statements, but batches of 32 and 128
/// writers committed 10–20 % fewer change sets a second with it (`Scripts/bench`).
final class PipelinedTransaction: Sendable {
    let connection: PostgresConnection
    let logger: Logger
    private let opening: EventLoopFuture<Void>
    /// BEGIN's outcome, once it has arrived: it arrives before any later statement's.
    private let opened = Mutex<Result<Void, any Error>?>(nil)
    private let committed = Mutex(false)

    /// Queues BEGIN; the first statement goes right behind it.
    init(on connection: PostgresConnection, isolation: String, logger: Logger) {
        self.connection = connection
        self.logger = logger
        let begin: EventLoopFuture<PostgresQueryResult> = connection.query("BEGIN ISOLATION LEVEL \(unescaped: isolation)", logger: logger)
        opening = begin.map { _ in () }
        opening.whenComplete { result in self.opened.withLock { $0 = result } }
    }

    /// Throws BEGIN's error, if it failed. Call it once a statement has answered: whatever that
    /// statement did then ran outside a transaction, and must not be trusted.
    func checkOpened() async throws {
        // Answers come in order, so BEGIN's is known by now; waiting is only a fallback.
        guard let result = opened.withLock({ $0 }) else { return try await opening.get() }
        try result.get()
    }

    /// COMMIT. An aborted transaction answers COMMIT with ROLLBACK and no error: that is thrown.
    func commit() async throws {
        try await checkOpened()
        // A COMMIT written to a closed connection is never answered (`openQuery`): PostgreSQL may
        // have ended the session while the transaction waited (`idle_in_transaction_session_timeout`).
        try connection.ensureOpen()
        committed.withLock { $0 = true }
        let answer: EventLoopFuture<PostgresQueryResult> = connection.query("COMMIT", logger: logger)
        let tag = try await answer.get().metadata.command
        guard tag == "COMMIT" else { throw StoreError.inconsistent("PostgreSQL answered COMMIT with \(tag): the transaction did not commit") }
    }

    /// COMMIT, unless it was sent already.
    func commitIfOpen() async throws {
        guard !committed.withLock({ $0 }) else { return }
        try await commit()
    }
}
