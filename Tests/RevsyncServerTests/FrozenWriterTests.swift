import Foundation
import NIOCore
import PostgresNIO
import RevsyncWire
import Testing
@testable import RevsyncServer

/// An instance frozen in the middle of a batch's transaction (stopped, its VM paused, starved
/// of CPU) holds the revision row's lock; its kernel still answers keep-alive, so only
/// PostgreSQL can tell, by the transaction waiting for its next statement. Before
/// `idle_in_transaction_session_timeout`, every writer of every other instance waited on that
/// lock until its own `lock_timeout` and got 503, for as long as the frozen one stayed frozen.
@Suite struct FrozenWriterTests {
    static func note(_ seq: Int64, _ body: String) -> ChangeSet {
        changeSet(seq: seq, ("notes", EntityChanges(create: [-seq], attributes: [-seq: [.init("body"): .string(body), "pinned": false]])))
    }

    @Test func anInstanceFrozenHoldingTheRevisionLockHoldsTheOthersUpOnlyForTwiceTheTimeout() async throws {
        // Two seconds: a transaction idle for four is ended. The frozen batch sleeps 12 s
        // between its stamp and COMMIT, holding the revision row's lock.
        try await withTestServer(configure: { $0.databaseTimeout = .seconds(2) }) { harness in
            let frozen = try await harness.register("member", name: "frozen")
            let other = try await harness.register("member", name: "other")
            var url = try #require(URLComponents(string: harness.server.settings.databaseURL))
            let name = "frozen-\(UUID().uuidString.prefix(8))"
            url.queryItems = (url.queryItems ?? []) + [URLQueryItem(name: "application_name", value: name)]
            let through = try #require(url.string)
            try await harness.withSecondInstance(configure: { $0.databaseURL = through }, applyDelay: { try? await Task.sleep(for: .seconds(12)) }) { stuck in
                // Before `ensureOpen`, its COMMIT, written to the connection PostgreSQL had closed,
                // was never answered, and this waited for ever (Scripts/test's bound names it).
                async let stuckAnswer = stuck.post(frozen, SyncRequest(maxRevision: 0, changeSets: [Self.note(1, "frozen")]))
                try await eventually("the frozen instance's batch holds the revision row, idle in its transaction", within: .seconds(20)) {
                    try await !harness.rows(
                        "SELECT 1 FROM pg_stat_activity WHERE application_name = \(name) AND state = 'idle in transaction'"
                    ).isEmpty
                }
                let frozenAt = ContinuousClock.now
                var written = false
                while !written, ContinuousClock.now - frozenAt < .seconds(10) {
                    let (status, body) = try await harness.post(other, SyncRequest(maxRevision: 0, changeSets: [Self.note(1, "other")]))
                    written = status == .ok
                    if !written {
                        #expect(status == .serviceUnavailable, "a write on the other instance was answered \(status): \(String(buffer: body))")
                        try await Task.sleep(for: .milliseconds(200))
                    }
                }
                #expect(written, "no write on the other instance went through within 10 s of the freeze: the frozen batch kept the lock")
                // The frozen batch's session was ended: its COMMIT cannot go through, and it says so.
                let (status, _) = try await stuckAnswer
                #expect(status == .serviceUnavailable)
                let bodies = try await harness.rows("SELECT body FROM notes").map { try $0.decode(String.self) }
                #expect(bodies == ["other"])
            }
        }
    }
}
