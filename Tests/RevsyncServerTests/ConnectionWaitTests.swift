import Logging
import PostgresNIO
import RevsyncTestSupport
import Synchronization
import Testing
@testable import RevsyncServer

/// `Database`'s wait for a connection, the same for every user of PostgreSQL: the body runs
/// in the caller's task on a lent connection (`ConnectionHandoff`), and the wait for that
/// connection is bounded by the timeout unless the caller asked for no limit (migrations).
@Suite struct ConnectionWaitTests {
    static let logger = Logger(label: "revsync.tests.connection-wait")

    /// The two ways in: a request's statements, and a snapshot's streaming reads.
    enum Entry: String, CaseIterable, Sendable {
        case withConnection, streamingTransaction

        func run<T: Sendable>(_ database: Database, _ body: (PostgresConnection) async throws -> T) async throws -> T {
            switch self {
            case .withConnection: try await database.withConnection(body)
            case .streamingTransaction: try await database.streamingTransaction("REPEATABLE READ READ ONLY", body)
            }
        }
    }

    /// A pool of one connection, with a one-second wait for it unless told otherwise. The
    /// connection is opened first, without a limit: in the whole suite's first minute opening
    /// one can take longer than a second, and that is not the wait the tests measure.
    private static func withOneConnection(timeout: Duration = .seconds(1), _ body: (Database) async throws -> Void) async throws {
        try await withServerDatabaseOfItsOwn(connections: 1, timeout: timeout, logger: logger) { database in
            try await database.withConnection(limits: .unbounded) { try await $0.run("SELECT 1", logger) }
            try await body(database)
        }
    }

    /// Runs `body` while another task holds the pool's only connection, for up to `hold`
    /// or until `body` has ended.
    private static func whileTheConnectionIsHeld(
        in database: Database, upTo hold: Duration, _ body: () async throws -> Void
    ) async throws {
        let release = Release()
        try await withThrowingTaskGroup(of: Void.self) { group in
            let held = Atomic<Bool>(false)
            group.addTask {
                // Without a limit: should its lease fail, the loop below would wait for ever.
                try await database.withConnection(limits: .unbounded) { _ in
                    held.store(true, ordering: .sequentiallyConsistent)
                    await release.wait(upTo: hold)
                }
            }
            while !held.load(ordering: .sequentiallyConsistent) { try await Task.sleep(for: .milliseconds(10)) }
            // Before the group waits for the holder, however `body` ended.
            defer { release.open() }
            try await body()
        }
    }

    @Test(arguments: Entry.allCases)
    func waitingForABusyPoolEndsAtTheTimeoutAndTheConnectionServesAfterwards(_ entry: Entry) async throws {
        try await Self.withOneConnection { database in
            try await Self.whileTheConnectionIsHeld(in: database, upTo: .seconds(30)) {
                var ran = false
                // Without a bound it would wait out the 30 s hold and then succeed.
                let error = await #expect(throws: StoreError.self) {
                    try await entry.run(database) { _ in ran = true }
                }
                #expect(error.map { "\($0)" } == "no PostgreSQL connection became free within 1.0 seconds")
                #expect(!ran)
            }
            // The request given up is gone from the pool's queue, and its one connection serves.
            var rows: [Int] = []
            try await entry.run(database) { connection in
                // The body runs in this task: it may change what this task holds.
                for try await value in try await connection.query("SELECT generate_series(1, 3)", logger: Self.logger).decode(Int.self) {
                    rows.append(value)
                }
            }
            #expect(rows == [1, 2, 3])
        }
    }

    /// Migrations wait for a connection without a limit: a pool busy for longer than the
    /// timeout delays them, it does not stop the server's start.
    @Test func withoutALimitTheWaitOutlastsTheTimeout() async throws {
        try await Self.withOneConnection { database in
            let start = ContinuousClock.now
            try await Self.whileTheConnectionIsHeld(in: database, upTo: .seconds(2)) {
                let value = try await database.transaction(limits: .unbounded) { connection in
                    try await connection.rows("SELECT 7::int", Self.logger).first?.decode(Int.self)
                }
                #expect(value == 7)
            }
            // It got the connection only when the 2 s hold ended, past the 1 s timeout.
            #expect(ContinuousClock.now - start >= .seconds(2))
        }
    }

    /// PostgresNIO 1.33.2 never answers a query written to a closed connection: a statement
    /// after PostgreSQL closed the connection (a restart) fails here instead of waiting for
    /// ever. The time limit turns such a wait into a failure.
    @Test(.timeLimit(.minutes(1))) func aStatementOnAClosedConnectionFailsInsteadOfWaiting() async throws {
        try await Self.withOneConnection { database in
            try await database.withConnection { connection in
                try await connection.run("SELECT 1", Self.logger)
                try await connection.close()
                let error = await #expect(throws: StoreError.self) { try await connection.run("SELECT 1", Self.logger) }
                #expect(error.map { "\($0)" } == "PostgreSQL closed the connection (a restart, or a transaction left idle too long) before the next statement")
            }
            // The pool replaces it (opening a connection, without a limit: see withOneConnection).
            let value = try await database.withConnection(limits: .unbounded) { try await $0.rows("SELECT 2::int", Self.logger).first?.decode(Int.self) }
            #expect(value == 2)
        }
    }

    /// A statement in flight when PostgreSQL ends its session (here an operator terminating the
    /// backend, as a restart does to every one) is 503, not 500: the device retries.
    /// A full disk, no memory, too many connections (SQLSTATE class 53), a read-only server: 503, not 500.
    @Test(.timeLimit(.minutes(1))) func aStatementPostgreSQLCannotDoNowIsUnavailable() async throws {
        try await withServerDatabaseOfItsOwn(connections: 2, timeout: .seconds(10), logger: Self.logger) { database in
            let error = await #expect(throws: StoreError.self) {
                try await database.withConnection { connection in
                    try await connection.run("DO $$ BEGIN RAISE EXCEPTION 'could not extend file: No space left on device' USING ERRCODE = 'disk_full'; END $$", Self.logger)
                }
            }
            #expect(error.map { "\($0)" } == "PostgreSQL cannot write now: could not extend file: No space left on device")
            // A server that went read-only (a standby after a switchover) is the same to a device.
            await #expect(throws: StoreError.self) {
                try await database.withConnection { connection in
                    try await connection.run("DO $$ BEGIN RAISE EXCEPTION 'cannot execute INSERT in a read-only transaction' USING ERRCODE = 'read_only_sql_transaction'; END $$", Self.logger)
                }
            }
        }
    }

    /// PostgresNIO's pool fails leases with its own error type once its circuit breaker has
    /// tripped (a minute of refused connections): that is PostgreSQL unreachable, 503.
    @Test func aLeaseThePoolRefusesIsUnavailable() {
        struct PoolRefused: Error {}
        #expect(Database.leaseFailure(PoolRefused()) is StoreError)
        #expect(Database.leaseFailure(CancellationError()) is CancellationError)
    }

    @Test(.timeLimit(.minutes(1))) func aStatementWhosePostgreSQLSessionEndsIsUnavailable() async throws {
        try await withServerDatabaseOfItsOwn(connections: 2, timeout: .seconds(10), logger: Self.logger) { database in
            let error = await #expect(throws: StoreError.self) {
                try await database.withConnection { connection in
                    let pid = try await connection.rows("SELECT pg_backend_pid()", Self.logger).first?.decode(Int32.self) ?? 0
                    async let terminated: Void = {
                        try await Task.sleep(for: .milliseconds(300))
                        try await database.withConnection { other in
                            try await other.run("SELECT pg_terminate_backend(\(pid))", Self.logger)
                        }
                    }()
                    try await connection.run("SELECT pg_sleep(30)", Self.logger)
                    try await terminated
                }
            }
            #expect(error.map { "\($0)" }?.hasPrefix("PostgreSQL ended the connection (a restart?): terminating connection due to administrator command") == true)
            // The pool replaces it. (It may hand the dying connection out once more before its
            // close is seen: that request gets 503 too, as during a restart, and a retry works.)
            var value: Int? = nil
            for _ in 0..<5 where value == nil {
                do {
                    value = try await database.withConnection { try await $0.rows("SELECT 3::int", Self.logger).first?.decode(Int.self) }
                } catch let retry as StoreError {
                    Self.logger.info("retrying after \(retry)")
                    try await Task.sleep(for: .milliseconds(100))
                }
            }
            #expect(value == 3)
        }
    }

    @Test func aBodysErrorIsThrownAndItsConnectionGoesBack() async throws {
        struct Broken: Error, Equatable {}
        try await Self.withOneConnection { database in
            for entry in Entry.allCases {
                await #expect(throws: Broken()) {
                    try await entry.run(database) { _ in throw Broken() }
                }
            }
            // With one connection, each of these needs it back from the one before.
            for expected in 1...3 {
                let value = try await database.withConnection { connection in
                    try await connection.rows("SELECT \(expected)::int", Self.logger).first?.decode(Int.self)
                }
                #expect(value == expected)
            }
        }
    }
}

extension ConnectionWaitTests {
    /// Reads one after another and at once on one connection, each lent in its turn and given
    /// back (`ConnectionHandoffTests` has each order of lending and asking). The time limit
    /// turns a hang into a failure; the wait for the connection is long enough for the whole
    /// suite's load.
    @Test(.timeLimit(.minutes(2))) func manyReadsOneAfterAnotherAndAtOnceEachGetTheirConnection() async throws {
        try await Self.withOneConnection(timeout: .seconds(30)) { database in
            for round in 1...20 {
                let value = try await database.streamingTransaction("REPEATABLE READ READ ONLY") { connection in
                    try await connection.rows("SELECT \(round)::int", Self.logger).first?.decode(Int.self)
                }
                #expect(value == round)
            }
            // Eight at a time on the one connection, each in its turn.
            try await withThrowingTaskGroup(of: Int?.self) { group in
                for round in 1...8 {
                    group.addTask {
                        try await database.streamingTransaction("REPEATABLE READ READ ONLY") { connection in
                            try await connection.rows("SELECT \(round)::int", Self.logger).first?.decode(Int.self)
                        }
                    }
                }
                var values: [Int] = []
                for try await value in group { values.append(try #require(value)) }
                #expect(values.sorted() == Array(1...8))
            }
        }
    }
}

/// A gate one task waits at until another opens it (or the wait's limit passes).
private final class Release: Sendable {
    private let opened = Atomic<Bool>(false)

    func open() { opened.store(true, ordering: .sequentiallyConsistent) }

    func wait(upTo limit: Duration) async {
        let end = ContinuousClock.now + limit
        while !opened.load(ordering: .sequentiallyConsistent), ContinuousClock.now < end {
            try? await Task.sleep(for: .milliseconds(10))
        }
    }
}
