import Foundation
import RevsyncWire
import Testing
@testable import RevsyncServer

/// Catch-up pages by count and bytes, and the retained log's horizon.
@Suite struct CatchUpTests {
    static func notes(_ count: Int) -> [ChangeSet] {
        (1...count).map { seq in changeSet(seq: Int64(seq), ("notes", EntityChanges(create: [Int64(-seq)], attributes: [Int64(-seq): ["body": .string(String(repeating: "n", count: 200)), "pinned": false]]))) }
    }

    @Test func largeCatchUpComesInPagesWithMore() async throws {
        try await withTestServer(configure: { $0.limits.catchUpMaxChangeSets = 3 }) { harness in
            let writer = try await harness.register("member", name: "writer")
            let reader = try await harness.register("viewer", name: "reader")
            let written = try await harness.sync(writer, from: 0, Self.notes(7))
            // The writer's own answer is cut too: its acknowledgements beyond the page come next time.
            #expect(written.maxRevision == 3 && written.more == true)
            var pages: [[Int64]] = []
            var position: Int64 = 0
            repeat {
                let page = try await harness.sync(reader, from: position)
                pages.append(page.changeSets.compactMap(\.revision))
                position = page.maxRevision
                if page.more != true { break }
            } while pages.count < 10
            #expect(pages == [[1, 2, 3], [4, 5, 6], [7]])
        }
    }

    @Test func byteLimitSendsAtLeastOneChangeSet() async throws {
        try await withTestServer(configure: { $0.limits.catchUpMaxBytes = 10 }) { harness in
            let writer = try await harness.register("member", name: "writer")
            _ = try await harness.sync(writer, from: 0, Self.notes(2))
            let page = try await harness.sync(writer, from: 0)
            #expect(page.changeSets.count == 1 && page.maxRevision == 1 && page.more == true)
        }
    }

    @Test func deviceBehindTheRetainedLogMustBootstrap() async throws {
        try await withTestServer(configure: { $0.logRetention = 2 }) { harness in
            let writer = try await harness.register("member", name: "writer")
            _ = try await harness.sync(writer, from: 0, Self.notes(5))
            let horizon = try await harness.server.pruner.pruneOnce()
            #expect(horizon == 3)
            let (status, body) = try await harness.post(writer, SyncRequest(maxRevision: 2))
            #expect(status == .gone)
            #expect(try harness.error(body).error == "snapshot_required")
            let page = try await harness.sync(writer, from: 3)
            #expect(page.changeSets.compactMap(\.revision) == [4, 5])
        }
    }

    @Test func pruningDeletesInBoundedBatchesWithoutWaitingForTheRevisionLock() async throws {
        try await withTestServer(configure: { $0.logRetention = 2 }) { harness in
            let writer = try await harness.register("member", name: "writer")
            _ = try await harness.sync(writer, from: 0, Self.notes(25))
            var pruner = harness.server.pruner
            pruner.batch = 4
            let logger = harness.server.database.logger
            // A writer holding the revision lock (the head row) does not hold the pruner up.
            let horizon = try await harness.server.postgres.withConnection { connection in
                try await connection.inTransaction("READ COMMITTED", logger) { locked in
                    try await locked.run("SELECT head FROM revsync_head FOR UPDATE", logger)
                    return try await pruner.pruneOnce()
                }
            }
            #expect(horizon == 23)
            let left = try await harness.rows("SELECT min(revision), count(*)::int FROM revsync_log").first?.decode((Int64, Int).self)
            #expect(left?.0 == 24 && left?.1 == 2)
        }
    }
}
