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
}
