import Foundation
import Testing
@testable import RevsyncTestSupport

/// Test databases left behind by earlier runs are told from the ones tests are using.
@Suite struct TestDatabaseTests {
    @Test func onlyTestDatabasesOlderThanAnHourAreLeftovers() {
        let now = Date()
        let seconds = Int(now.timeIntervalSince1970)
        #expect(!TestDatabase.isLeftover("revsync_test_\(seconds - 10)_0123456789ab", now: now))
        #expect(!TestDatabase.isLeftover("revsync_test_\(seconds - 3_500)_0123456789ab", now: now))
        #expect(TestDatabase.isLeftover("revsync_test_\(seconds - 3_700)_0123456789ab", now: now))
        // Named before the names carried their time.
        #expect(TestDatabase.isLeftover("revsync_test_0123456789abcdef", now: now))
        // Not a test database.
        #expect(!TestDatabase.isLeftover("revsync", now: now))
        #expect(!TestDatabase.isLeftover("revsync_bench", now: now))
    }

    /// `withRole` leaves nothing behind when its body fails: not the database, not the role.
    @Test func aRolesDatabaseAndTheRoleAreDroppedWhenTheBodyThrows() async throws {
        struct Failed: Error, Equatable {}
        var seen: (database: String, role: String)?
        await #expect(throws: Failed()) {
            try await TestDatabase.withRole(connectionLimit: 1) { url in
                let components = try #require(URLComponents(string: url))
                let database = String(components.path.dropFirst()), role = try #require(components.user)
                // Both exist while the body runs.
                #expect(try await TestDatabase.valuesOnServer("SELECT datname FROM pg_database WHERE datname = '\(database)'") == [database])
                #expect(try await TestDatabase.valuesOnServer("SELECT rolname::text FROM pg_roles WHERE rolname = '\(role)'") == [role])
                seen = (database, role)
                throw Failed()
            }
        }
        let (database, role) = try #require(seen)
        #expect(try await TestDatabase.valuesOnServer("SELECT datname FROM pg_database WHERE datname = '\(database)'").isEmpty)
        #expect(try await TestDatabase.valuesOnServer("SELECT rolname::text FROM pg_roles WHERE rolname = '\(role)'").isEmpty)
    }
}
