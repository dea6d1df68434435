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

    public init(client: PostgresClient, logger: Logger, timeout: Duration) {
        self.client = client
        self.logger = logger
        self.timeout = timeout
    }

    /// Runs `body` on one connection; PostgreSQL being unreachable or too slow becomes 503.
    /// `unlimited`: no time limit, for streaming to a client at its own pace.
    func withConnection<T: Sendable>(
        unlimited: Bool = false, _ body: @Sendable @escaping (PostgresConnection) async throws -> T
    ) async throws -> T {
        let client = self.client
        leases.increment()
        return try await withDeadline(unlimited ? nil : timeout) {
            try await client.withConnection(body)
        }
    }

    /// Runs `body` in a transaction with the given isolation; rolls back when it throws.
    func transaction<T: Sendable>(
        _ isolation: String = "READ COMMITTED", unlimited: Bool = false,
        _ body: @Sendable @escaping (PostgresConnection) async throws -> T
    ) async throws -> T {
        let logger = self.logger
        return try await withConnection(unlimited: unlimited) { connection in
            try await connection.inTransaction(isolation, logger, body)
        }
    }

    /// A transaction for streaming its reads to a client at the client's pace: no
    /// deadline, and `body` may capture the response writer (it does not escape).
    func streamingTransaction<T: Sendable>(_ isolation: String, _ body: (PostgresConnection) async throws -> T) async throws -> T {
        let logger = self.logger
        leases.increment()
        do {
            return try await client.withConnection { connection in
                try await connection.inTransaction(isolation, logger, body)
            }
        } catch let error as PSQLError where error.isConnectionFailure {
            throw StoreError.unavailable("PostgreSQL is unreachable: \(error.code)")
        }
    }

    /// Races `body` against a deadline; a timeout or a lost connection becomes `StoreError.unavailable`.
    private func withDeadline<T: Sendable>(_ limit: Duration?, _ body: @Sendable @escaping () async throws -> T) async throws -> T {
        do {
            guard let limit else { return try await body() }
            return try await withThrowingTaskGroup(of: T?.self) { group in
                group.addTask { try await body() }
                group.addTask {
                    try await Task.sleep(for: limit)
                    return nil
                }
                defer { group.cancelAll() }
                guard let first = try await group.next(), let result = first else {
                    throw StoreError.unavailable("PostgreSQL did not answer within \(limit)")
                }
                return result
            }
        } catch let error as PSQLError where error.isConnectionFailure {
            throw StoreError.unavailable("PostgreSQL is unreachable: \(error.code)")
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
        _ = try await self.query(query, logger: logger).collect()
    }

    /// Runs a query and returns all its rows.
    public func rows(_ query: PostgresQuery, _ logger: Logger) async throws -> [PostgresRow] {
        try await self.query(query, logger: logger).collect()
    }
}

extension PSQLError {
    /// The SQLSTATE of a server error, e.g. "23503" for a foreign key violation.
    var sqlState: String? { serverInfo?[.sqlState] }

    var isConnectionFailure: Bool {
        [.connectionError, .serverClosedConnection, .clientClosedConnection, .poolClosed, .uncleanShutdown].contains(code)
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
