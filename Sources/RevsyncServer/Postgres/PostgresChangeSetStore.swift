import Foundation
import Logging
import NIOCore
import PostgresNIO
import RevsyncRules
import RevsyncWire

/// Change sets applied in PostgreSQL: one transaction a batch, run again after a deadlock.
struct PostgresChangeSetStore: ChangeSetStore {
    let database: Database
    let schema: DatasetSchema
    /// A pause after each change set's revision stamp, before its COMMIT (tests widen the window with it).
    var delayAfterStamp: ApplyDelay? = nil
    /// Counts the batches run again (`revsync_batch_retries_total`).
    var metrics: ServerMetrics? = nil

    /// SQLSTATEs that mean "run the whole transaction again".
    private static let retryableStates: Set<String> = ["40001", "40P01"]
    /// Runs of one batch, the first included, before its requests get `503`.
    static let attempts = 5

    func newestDatasetSchema() async throws -> DatasetSchema? {
        let logger = database.logger
        let rows = try await database.withConnection { connection in
            try await connection.rows("SELECT version, document FROM revsync_schema ORDER BY version DESC LIMIT 1", logger)
        }
        guard let (version, text) = try rows.first?.decode((Int, String).self) else { return nil }
        return try SchemaLoader.load(data: Data(text.utf8), file: "the schema stored in the database (version \(version))")
    }

    func transaction<T: Sendable>(_ body: @escaping @Sendable (any ApplyTransaction) async throws -> T) async throws -> T {
        let schema = self.schema, logger = database.logger, delay = delayAfterStamp
        var attempt = 0
        while true {
            attempt += 1
            do {
                return try await database.withConnection { connection in
                    // The transaction's statements answer on the connection's event loop, and the
                    // batch goes on there (docs/architecture.md): no pool thread woken per statement.
                    try await withTaskExecutorPreference(EventLoopTaskExecutor(connection.eventLoop)) {
                        let transaction = PipelinedTransaction(on: connection, isolation: "READ COMMITTED", logger: logger)
                        do {
                            // The stamp commits the batch; a body that never reaches it commits here.
                            let result = try await body(PostgresApplyTransaction(transaction: transaction, schema: schema, delay: delay))
                            try await transaction.commitIfOpen()
                            return result
                        } catch {
                            // After a COMMIT that rolled back, PostgreSQL only warns of no transaction.
                            try? await connection.run("ROLLBACK", logger)
                            throw error
                        }
                    }
                }
            } catch let error where error.sqlState.map(Self.retryableStates.contains) == true {
                let reason = error.sqlState == "40P01" ? "deadlock" : "serialization_failure"
                guard attempt < Self.attempts else {
                    // Nothing of the batch committed, and the next try may well pass: a 503
                    // the device retries, not a 500 that reads as a bug.
                    logger.warning("a batch failed every run", metadata: ["reason": "\(reason)", "attempts": "\(attempt)"])
                    throw StoreError.unavailable("PostgreSQL ended this batch's transaction \(attempt) times in a row (\(reason)); nothing of it was committed")
                }
                metrics?.recordBatchRetry(reason: reason)
                logger.debug("running the batch again", metadata: ["reason": "\(reason)", "attempt": "\(attempt)"])
            } catch let error as PSQLError {
                // A deferred foreign key checked at COMMIT: the batch rolled back, and the caller
                // runs it again with a savepoint per change set.
                throw PostgresApplyTransaction.conflict(from: error) ?? error
            }
        }
    }
}
