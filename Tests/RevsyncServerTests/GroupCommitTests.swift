import Foundation
import PostgresNIO
import RevsyncWire
import Testing
@testable import RevsyncServer

/// Group commit on PostgreSQL: concurrent requests share one transaction, and a change set
/// PostgreSQL refuses is rejected alone while the rest of its batch commits.
@Suite struct GroupCommitTests {
    @Test func aValuePostgresRefusesRejectsItsChangeSetAloneAndTheBatchCommitsGapFree() async throws {
        // A wait lets the three requests join one batch: a second, since with the whole suite
        // running a request 40 ms behind can reach the committer more than 300 ms late.
        try await withTestServer(configure: { $0.commitBatchWait = .seconds(1) }) { harness in
            let admin = try await harness.register("admin", name: "admin")
            let basics = try await harness.seedBasics(admin)
            // A rule the sync rules know nothing of: only PostgreSQL enforces it.
            _ = try await harness.rows("ALTER TABLE notes ADD CONSTRAINT no_forbidden CHECK (body IS DISTINCT FROM 'forbidden')")
            var devices: [TestDevice] = []
            for name in ["a", "b", "c"] { devices.append(try await harness.register("member", name: name)) }
            let bodies = ["fine", "forbidden", "also fine"]
            let responses = try await withThrowingTaskGroup(of: (Int, SyncResponse).self) { group in
                for (index, device) in devices.enumerated() {
                    group.addTask {
                        try await Task.sleep(for: .milliseconds(20 * index))
                        let set = changeSet(seq: 1, ("notes", EntityChanges(create: [-1], attributes: [-1: ["body": .string(bodies[index]), "pinned": false]])))
                        return (index, try await harness.sync(device, from: basics.revision, [set]))
                    }
                }
                var all: [Int: SyncResponse] = [:]
                for try await (index, response) in group { all[index] = response }
                return all
            }
            let refused = try #require(responses[1]?.corrective.first)
            #expect(refused.reason?.code == .invalid)
            #expect(responses[0]?.committed.isEmpty == false && responses[2]?.committed.isEmpty == false)
            #expect(try await harness.head() == basics.revision + 2)
            let revisions = try await harness.rows("SELECT revision FROM revsync_log WHERE revision > \(basics.revision) ORDER BY revision")
                .map { try $0.decode(Int64.self) }
            #expect(revisions == [basics.revision + 1, basics.revision + 2])
            // Both log entries were written by one transaction: the batch was re-run with a savepoint per change set.
            let transactions = try await harness.rows("SELECT count(DISTINCT xmin::text)::int FROM revsync_log WHERE revision > \(basics.revision)")
            #expect(try transactions.first?.decode(Int.self) == 1)
            let notes = try await harness.rows("SELECT body FROM notes ORDER BY id").map { try $0.decode(String.self) }
            #expect(Set(notes) == ["fine", "also fine"])
            // The refused seq keeps its outcome: a retry is answered with the same rejection.
            let retry = try await harness.sync(devices[1], from: basics.revision + 2, [changeSet(seq: 1, ("notes", EntityChanges(create: [-1], attributes: [-1: ["body": "forbidden", "pinned": false]])))])
            #expect(retry.corrective.first?.reason?.code == .invalid)
        }
    }

    /// A limit of PostgreSQL's own met by one change set (a value too large for an index an
    /// operator added) rejects that change set as `invalid`; the request and the others in it
    /// go through. It failed the whole request with 500 before, and so every retry.
    @Test func aValueTooLargeForAnIndexRejectsItsChangeSetAlone() async throws {
        try await withTestServer { harness in
            _ = try await harness.rows("CREATE INDEX notes_body ON notes (body)")
            let device = try await harness.register("member", name: "m")
            // Random letters, so that compression cannot bring the index entry under its limit (2,704 bytes).
            var generator = SystemRandomNumberGenerator()
            let huge = String((0..<12_000).map { _ in Character(UnicodeScalar(UInt8.random(in: 97...122, using: &generator))) })
            let response = try await harness.sync(device, from: 0, [
                changeSet(seq: 1, ("notes", EntityChanges(create: [-1], attributes: [-1: ["body": "small", "pinned": false]]))),
                changeSet(seq: 2, ("notes", EntityChanges(create: [-2], attributes: [-2: ["body": .string(huge), "pinned": false]]))),
                changeSet(seq: 3, ("notes", EntityChanges(create: [-3], attributes: [-3: ["body": "after", "pinned": false]]))),
            ])
            #expect(response.committed.map(\.seq) == [1, 3])
            let refused = try #require(response.corrective.first)
            #expect(refused.seq == 2 && refused.reason?.code == .invalid)
            #expect(refused.reason?.message.contains("index row") == true)
            #expect(try await harness.head() == 2)
            #expect(try await harness.count("notes") == 2)
        }
    }

    @Test func aConstraintCheckedAtCommitRejectsOnlyTheChangeSetThatBrokeIt() async throws {
        try await withTestServer(configure: { $0.commitBatchWait = .seconds(1) }) { harness in
            // Checked at COMMIT, as the dataset's foreign keys are: the whole batch rolls back
            // there, and runs again with a savepoint per change set.
            _ = try await harness.rows("ALTER TABLE notes ADD CONSTRAINT one_body UNIQUE (body) DEFERRABLE INITIALLY DEFERRED")
            var devices: [TestDevice] = []
            for name in ["a", "b", "c"] { devices.append(try await harness.register("member", name: name)) }
            let bodies = ["same", "same", "other"]
            let responses = try await withThrowingTaskGroup(of: (Int, SyncResponse).self) { group in
                for (index, device) in devices.enumerated() {
                    group.addTask {
                        try await Task.sleep(for: .milliseconds(20 * index))
                        let set = changeSet(seq: 1, ("notes", EntityChanges(create: [-1], attributes: [-1: ["body": .string(bodies[index]), "pinned": false]])))
                        return (index, try await harness.sync(device, from: 0, [set]))
                    }
                }
                var all: [Int: SyncResponse] = [:]
                for try await (index, response) in group { all[index] = response }
                return all
            }
            // Which of the two "same" arrives first is up to the scheduler: one commits, the other is refused.
            let same = [responses[0], responses[1]]
            #expect(same.filter { $0?.committed.contains(where: { $0.seq == 1 }) == true }.count == 1)
            #expect(same.filter { $0?.corrective.first?.reason?.code == .invalid }.count == 1)
            #expect(responses[2]?.committed.contains(where: { $0.seq == 1 }) == true)
            #expect(try await harness.head() == 2)
            let notes = try await harness.rows("SELECT body FROM notes ORDER BY id").map { try $0.decode(String.self) }
            #expect(notes.sorted() == ["other", "same"])
        }
    }

    @Test func aCommitSlowerThanTheTimeoutIsAnsweredWithItsAcknowledgementNotA503() async throws {
        // The pause sits between the stamp and COMMIT, where no statement runs: only a timer in
        // the server could cut it short, and its COMMIT would still go through. The timeout is
        // seconds, not one: under the whole suite's load on a slow machine an ordinary statement
        // of this sync outlasted a one-second statement_timeout, and the 503 was that one's.
        let pause: ApplyDelay = { try? await Task.sleep(for: .seconds(6)) }
        try await withTestServer(configure: { $0.databaseTimeout = .seconds(5) }, applyDelay: pause) { harness in
            try await harness.warmPool(4)
            let writer = try await harness.againWhileNoConnectionFree { try await harness.register("member", name: "writer") }
            let set = changeSet(seq: 1, ("notes", EntityChanges(create: [-1], attributes: [-1: ["body": "slow", "pinned": false]])))
            // Not retried on any other 503: that is the answer this test is about.
            let response = try await harness.againWhileNoConnectionFree { try await harness.sync(writer, from: 0, [set]) }
            #expect(response.committed.first?.revision == 1)
            #expect(try await harness.head() == 1)
        }
    }

    @Test func aLockWaitLongerThanTheTimeoutIsCancelledByPostgresAndCommitsNothing() async throws {
        // Five seconds, for the same reason as above: the statements before the lock wait must
        // not run into the timeout themselves under the suite's load.
        try await withTestServer(configure: { $0.databaseTimeout = .seconds(5) }) { harness in
            try await harness.warmPool(4)
            let admin = try await harness.againWhileNoConnectionFree { try await harness.register("admin", name: "admin") }
            let basics = try await harness.againWhileNoConnectionFree { try await harness.seedBasics(admin) }
            let rename = changeSet(seq: 2, ("teams", EntityChanges(update: [basics.team], attributes: [basics.team: ["revision": .integer(basics.revision), "name": "Owls"]])))
            let logger = harness.server.database.logger
            // Another session holds the team's row lock for longer than the timeout.
            let (status, body) = try await harness.server.postgres.withConnection { connection in
                try await connection.inTransaction("READ COMMITTED", logger) { locked in
                    try await locked.run("SELECT id FROM teams WHERE id = \(basics.team) FOR UPDATE", logger)
                    // Only the lock wait's 503 counts: one for want of a connection is asked again.
                    return try await harness.againWhileNoConnectionFree(refused: TestHarness.noConnectionFree) {
                        try await harness.post(admin, SyncRequest(maxRevision: basics.revision, changeSets: [rename]))
                    }
                }
            }
            #expect(status == .serviceUnavailable)
            #expect(try harness.error(body).error == "unavailable")
            #expect(try await harness.head() == basics.revision)
            // Nothing of it was kept: sent again, it applies.
            let retry = try await harness.againWhileNoConnectionFree { try await harness.sync(admin, from: basics.revision, [rename]) }
            #expect(retry.committed.first?.revision == basics.revision + 1)
        }
    }
}
