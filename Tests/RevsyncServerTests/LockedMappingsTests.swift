import PostgresNIO
import RevsyncWire
import Synchronization
import Testing
@testable import RevsyncServer

/// A batch locks its devices and reads their temporary ids in one statement, whose snapshot
/// is older than the lock when it had to wait: the ids another instance mapped meanwhile must
/// still be found.
@Suite struct LockedMappingsTests {
    /// The first instance holds a batch between its stamp and COMMIT, with the device's row
    /// locked; the second instance's batch for the same device, which uses the id the first
    /// creates, waits for that row and goes on after the COMMIT.
    @Test(arguments: [true, false])
    func aBatchThatWaitedForItsDeviceFindsTheIdsMappedMeanwhile(withSeq: Bool) async throws {
        let gate = StampGate()
        try await withTestServer(applyDelay: { await gate.holdFirst() }) { first in
            try await first.withSecondInstance { second in
                let device = try await first.register("member", name: "phone")
                let create = changeSet(seq: withSeq ? 1 : nil, ("notes", EntityChanges(create: [-1], attributes: [-1: ["body": "first", "pinned": false]])))
                let edit = changeSet(seq: withSeq ? 2 : nil, ("notes", EntityChanges(update: [-1], attributes: [-1: ["revision": .integer(1), "body": "edited"]])))

                async let created = first.sync(device, from: 0, [create])
                await gate.reached()
                async let edited = second.sync(device, from: 0, [edit])
                // Release the first only once the second waits for the device's row.
                let waiting: PostgresQuery = """
                    SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'
                    AND query LIKE '%FROM revsync_devices%FOR NO KEY UPDATE%'
                    """
                let deadline = ContinuousClock.now + .seconds(20)
                while try await first.rows(waiting).first?.decode(Int64.self) == 0 {
                    try #require(ContinuousClock.now < deadline, "the second instance's batch never waited for the device's row")
                    try await Task.sleep(for: .milliseconds(10))
                }
                gate.release()

                #expect(try await created.committed.contains { $0.revision == 1 })
                let answer = try await edited
                #expect(answer.corrective.isEmpty, "refused: \(answer.corrective.map { $0.reason?.message ?? "" })")
                #expect(answer.committed.contains { $0.revision == 2 })
                let bodies = try await first.rows("SELECT body FROM notes").map { try $0.decode(String.self) }
                #expect(bodies == ["edited"])
            }
        }
    }
}

/// Holds the first batch that reaches it, between its stamp and its COMMIT, until released.
private final class StampGate: Sendable {
    private let taken = Mutex(false)
    private let arrivals = AsyncStream<Void>.makeStream()
    private let releases = AsyncStream<Void>.makeStream()

    func holdFirst() async {
        guard !taken.withLock({ taken in defer { taken = true }; return taken }) else { return }
        arrivals.continuation.yield()
        for await _ in releases.stream { break }
    }

    func reached() async {
        for await _ in arrivals.stream { break }
    }

    func release() { releases.continuation.yield() }
}
