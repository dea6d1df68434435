import PostgresNIO
import RevsyncWire
import Testing
@testable import RevsyncServer

/// A batch that PostgreSQL refused as a whole runs again isolated, writing each winner's
/// records before it stamps them. It must take the revision lock before those writes: a
/// unique value it held while waiting for the lock would deadlock with another instance's
/// batch that holds the lock and writes the same value (PostgreSQL breaks that after
/// `deadlock_timeout`, a second, and one batch runs again).
@Suite struct IsolatedRunLockTests {
    @Test func anIsolatedRunTakesTheRevisionLockBeforeItWrites() async throws {
        try await withTestServer { first in
            try await first.withSecondInstance { second in
                // Constraints the rules do not know, added by hand: a unique body, a forbidden
                // body, and a deferred trigger that holds a note "held" at its check until the
                // test lets it go (an advisory lock the test holds).
                _ = try await first.rows("ALTER TABLE notes ADD CONSTRAINT unique_body UNIQUE (body)")
                _ = try await first.rows("ALTER TABLE notes ADD CONSTRAINT no_forbidden CHECK (body <> 'forbidden')")
                _ = try await first.rows("""
                    CREATE FUNCTION hold_note() RETURNS trigger LANGUAGE plpgsql AS $$
                    BEGIN PERFORM pg_advisory_xact_lock_shared(4242); RETURN NULL; END $$
                    """)
                _ = try await first.rows("""
                    CREATE CONSTRAINT TRIGGER hold_note AFTER INSERT ON notes DEFERRABLE INITIALLY DEFERRED
                    FOR EACH ROW WHEN (NEW.body = 'held') EXECUTE FUNCTION hold_note()
                    """)
                let phone = try await first.register("member", name: "phone")
                let tablet = try await second.register("member", name: "tablet")
                let logger = first.server.database.logger

                let (phoneAnswer, tabletAnswer) = try await first.server.database.withConnection(limits: .unbounded) { gate in
                    try await gate.run("SELECT pg_advisory_lock(4242)", logger)
                    // The phone's batch breaks the CHECK, runs again isolated, writes "held" and
                    // stops at its check.
                    async let phoneAnswer = first.sync(phone, from: 0, [Self.note(1, "held"), Self.note(2, "forbidden")])
                    try await Self.waitFor(first, "the phone's isolated run never reached its check", """
                        SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()
                        AND wait_event_type = 'Lock' AND wait_event = 'advisory'
                        """)
                    // The tablet's batch, on the other instance, writes "held" too, and waits:
                    // for the revision lock (or, were it not taken, for the phone's "held").
                    async let tabletAnswer = second.sync(tablet, from: 0, [Self.note(1, "held")])
                    try await Self.waitFor(first, "the tablet's batch never waited in its stamp", """
                        SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()
                        AND wait_event_type = 'Lock' AND query LIKE '%UPDATE revsync_head%'
                        """)
                    try await gate.run("SELECT pg_advisory_unlock(4242)", logger)
                    return (try await phoneAnswer, try await tabletAnswer)
                }

                #expect(phoneAnswer.committed.map(\.seq) == [1])
                #expect(phoneAnswer.corrective.map(\.seq) == [2])
                #expect(tabletAnswer.corrective.map(\.seq) == [1])
                #expect(tabletAnswer.corrective.first?.reason?.code == .invalid)
                let bodies = try await first.rows("SELECT body FROM notes").map { try $0.decode(String.self) }
                #expect(bodies == ["held"])
                for instance in [first, second] {
                    let metrics = String(buffer: try await instance.raw("/metrics", method: .get, token: nil).1)
                    #expect(!metrics.contains("revsync_batch_retries_total{"), "a batch ran again: \(metrics.split(separator: "\n").filter { $0.contains("retries") })")
                }
            }
        }
    }

    private static func note(_ seq: Int64, _ body: String) -> ChangeSet {
        changeSet(seq: seq, ("notes", EntityChanges(create: [-seq], attributes: [-seq: ["body": .string(body), "pinned": false]])))
    }

    private static func waitFor(_ harness: TestHarness, _ failure: Comment, _ query: PostgresQuery) async throws {
        let deadline = ContinuousClock.now + .seconds(20)
        while try await harness.rows(query).first?.decode(Int64.self) == 0 {
            try #require(ContinuousClock.now < deadline, failure)
            try await Task.sleep(for: .milliseconds(10))
        }
    }
}
