import Logging
import PostgresNIO
import RevsyncTestSupport
import Testing
@testable import RevsyncServer

/// `ConnectionHandoff` in each order its three parties can come in: the leasing task, the
/// caller waiting for the connection, and the deadline.
@Suite struct ConnectionHandoffTests {
    static let logger = Logger(label: "revsync.tests.handoff")

    /// Runs `body` with a real connection to lend (leased from a pool of one).
    private static func withAConnection(_ body: @Sendable @escaping (PostgresConnection) async throws -> Void) async throws {
        try await withServerDatabaseOfItsOwn(connections: 1, timeout: .seconds(5), logger: logger) { database in
            try await database.withConnection(body)
        }
    }

    /// The connection lent before the caller asks: the caller still gets it. (A first version
    /// answered such a caller "no connection", and its lender waited for it back for ever.)
    @Test func lentBeforeAskedIsStillTheCallersAndGoesBackWhenGivenBack() async throws {
        try await Self.withAConnection { connection in
            let handoff = ConnectionHandoff()
            let lender = Task { await handoff.lend(connection) }
            // Lent, and waiting to be given back, before the caller asks.
            try await Task.sleep(for: .milliseconds(200))
            let lent = try await handoff.connection()
            #expect(lent === connection)
            #expect(!handoff.expire(), "a deadline after the lending changes nothing")
            handoff.giveBack()
            await lender.value
        }
    }

    @Test func askedBeforeLentGetsItWhenLent() async throws {
        try await Self.withAConnection { connection in
            let handoff = ConnectionHandoff()
            let caller = Task { try await handoff.connection() }
            try await Task.sleep(for: .milliseconds(200))
            let lender = Task { await handoff.lend(connection) }
            #expect(try await caller.value === connection)
            handoff.giveBack()
            await lender.value
        }
    }

    @Test func aDeadlineBeforeTheLendingLeavesTheCallerWithoutAndTheLateConnectionGoesStraightBack() async throws {
        try await Self.withAConnection { connection in
            let handoff = ConnectionHandoff()
            let caller = Task { try await handoff.connection() }
            try await Task.sleep(for: .milliseconds(100))
            #expect(handoff.expire())
            #expect(try await caller.value == nil)
            // Returns without being given back.
            await handoff.lend(connection)
        }
    }

    @Test func aFailedLeaseIsTheCallersError() async throws {
        struct LeaseFailed: Error {}
        let handoff = ConnectionHandoff()
        handoff.fail(LeaseFailed())
        await #expect(throws: LeaseFailed.self) { try await handoff.connection() }
        #expect(!handoff.expire())
    }
}
