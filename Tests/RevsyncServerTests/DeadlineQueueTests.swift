import Testing
@testable import RevsyncServer

/// `DeadlineQueue`: one timer for every wait for a connection. (A wait ends early
/// here by a failed lease, which needs no database; `ConnectionWaitTests` runs it with one.)
@Suite struct DeadlineQueueTests {
    struct LeaseFailed: Error {}

    @Test func waitsStillWaitingAtTheirDeadlineAreExpiredAndOnesThatEndedAreNot() async throws {
        let deadlines = DeadlineQueue<ConnectionHandoff>(limit: .milliseconds(300))
        let first = ConnectionHandoff(), ended = ConnectionHandoff(), last = ConnectionHandoff()
        for handoff in [first, ended, last] { deadlines.add(handoff) }
        ended.fail(LeaseFailed())
        // Both callers still waiting are let go: no connection, no error.
        #expect(try await first.connection() == nil)
        #expect(try await last.connection() == nil)
        await #expect(throws: LeaseFailed.self) { try await ended.connection() }
        #expect(deadlines.count == 0)
        // The timer starts again for a wait added after the queue ran empty.
        let later = ConnectionHandoff()
        deadlines.add(later)
        #expect(try await later.connection() == nil)
    }

    /// Waits that end early leave the queue as later ones are added, not at their deadline:
    /// only those behind a wait still waiting stay.
    @Test func waitsThatEndedLeaveTheQueueWithoutWaitingForTheirDeadline() async throws {
        let deadlines = DeadlineQueue<ConnectionHandoff>(limit: .seconds(600))
        for _ in 0..<1000 {
            let handoff = ConnectionHandoff()
            deadlines.add(handoff)
            handoff.fail(LeaseFailed())
        }
        #expect(deadlines.count == 1)

        let waiting = ConnectionHandoff()
        deadlines.add(waiting)
        for _ in 0..<10 {
            let handoff = ConnectionHandoff()
            deadlines.add(handoff)
            handoff.fail(LeaseFailed())
        }
        #expect(deadlines.count == 11, "the ended waits behind one still waiting stay")
        waiting.fail(LeaseFailed())
        deadlines.add(ConnectionHandoff())
        #expect(deadlines.count == 1)
    }
}
