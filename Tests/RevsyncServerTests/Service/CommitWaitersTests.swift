import NIOCore
import NIOPosix
import Synchronization
import RevsyncRules
import RevsyncTestSupport
import Testing
@testable import RevsyncServer

/// The waiters' registry and the shared read, without a server.
@Suite(.timeLimit(.minutes(1))) struct CommitWaitersTests {
    let waiters = CommitWaiters(timers: MultiThreadedEventLoopGroup.singleton)

    /// A waiter whose ending is awaited; `ticket` hears its ticket.
    func wait(after revision: Int64, for duration: Duration, ticket: (@Sendable (CommitWaiters.Ticket) -> Void)? = nil) async -> CommitWaiters.WaitResult {
        await withCheckedContinuation { continuation in
            let issued = waiters.park(after: revision, for: duration) { continuation.resume(returning: $0) }
            ticket?(issued)
        }
    }

    @Test func aHeadPastTheRevisionWakesOnlyTheWaitersBehindIt() async throws {
        waiters.advance(to: 10)
        let behind = Task { await wait(after: 10, for: .seconds(30)) }
        let ahead = Task { await wait(after: 12, for: .seconds(30)) }
        try await eventually { waiters.count == 2 }
        waiters.advance(to: 11)
        #expect(await behind.value.ending == .committed)
        #expect(waiters.count == 1)
        waiters.advance(to: 13)
        #expect(await ahead.value.ending == .committed)
    }

    @Test func aHeadAlreadyPastTheRevisionEndsTheWaitAtOnce() async throws {
        waiters.advance(to: 5)
        #expect(await wait(after: 4, for: .seconds(30)).ending == .committed)
        #expect(waiters.count == 0)
    }

    @Test func theHeadNeverMovesBack() async throws {
        waiters.advance(to: 7)
        waiters.advance(to: 3)
        #expect(waiters.head == 7)
    }

    @Test func theWaitRunsOut() async throws {
        let result = await wait(after: 0, for: .milliseconds(50))
        #expect(result.ending == .timedOut)
        #expect(waiters.count == 0)
    }

    /// One timer serves every wait: a shorter wait that comes after a longer one must move it,
    /// and the timer is set again for the longer one after. (The longer one's 6 s only has to
    /// outlast the shorter one's 50 ms on a busy machine: at 1.5 s it ran out first once, with
    /// the whole suite starting on two cores.)
    @Test func aShorterWaitParkedLaterRunsOutFirst() async throws {
        let endings = Endings()
        let long = Task {
            let result = await wait(after: 0, for: .seconds(6))
            endings.value.withLock { $0.append("long") }
            return result.ending
        }
        try await eventually { waiters.count == 1 }
        let short = await wait(after: 0, for: .milliseconds(50))
        endings.value.withLock { $0.append("short") }
        #expect(short.ending == .timedOut)
        #expect(waiters.count == 1)
        #expect(await long.value == .timedOut)
        #expect(endings.value.withLock { $0 } == ["short", "long"])
        #expect(waiters.count == 0)
    }

    /// Waits that ended early leave their deadlines behind, ahead of a later wait's; that wait
    /// still runs out. (The early ones' 20 s only has to outlast parking 100 waits on a busy
    /// machine: at 100 ms some ran out first while the whole suite ran, once at 2 s, and once
    /// at 8 s in a fresh clone's suite.)
    @Test func waitsEndedEarlyDoNotHoldUpTheOthersTimeouts() async throws {
        let tickets = Tickets()
        var released: [Task<CommitWaiters.WaitResult, Never>] = []
        for _ in 0..<100 {
            released.append(Task { await wait(after: 0, for: .seconds(20)) { ticket in tickets.value.withLock { $0.append(ticket) } } })
        }
        try await eventually { waiters.count == 100 }
        for ticket in tickets.value.withLock({ $0 }) { waiters.release(ticket) }
        for task in released { #expect(await task.value.ending == .released) }
        #expect(await wait(after: 0, for: .milliseconds(20_500)).ending == .timedOut)
        #expect(waiters.count == 0)
    }

    @Test func closingReleasesEveryWaiterAndLaterOnesAtOnce() async throws {
        let first = Task { await wait(after: 0, for: .seconds(30)) }
        try await eventually { waiters.count == 1 }
        waiters.close()
        #expect(await first.value.ending == .released)
        #expect(await wait(after: 0, for: .seconds(30)).ending == .released)
    }

    /// A rewind (the database's history id renewed) ends every wait and sets the head back.
    /// A request that read the log before it and parks after it read the old line: its wait ends
    /// at once too, where it would otherwise wait for an old revision the new line may not reach
    /// for its whole wait. One that read after it parks against the new head.
    @Test func aRewindEndsTheWaitsOfRequestsThatReadTheOldLineParkedOrNot() async throws {
        waiters.advance(to: 505)
        let oldLine = waiters.line
        let parked = Task { await wait(after: 505, for: .seconds(30)) }
        try await eventually { waiters.count == 1 }
        waiters.rewind(to: 449)
        #expect(await parked.value.ending == .released)
        #expect(waiters.head == 449)

        let late = await withCheckedContinuation { continuation in
            waiters.park(after: 505, for: .seconds(30), line: oldLine) { continuation.resume(returning: $0) }
        }
        #expect(late.ending == .released, "read the old line before the rewind, parked after it")
        #expect(waiters.count == 0)

        let newLine = waiters.line
        #expect(newLine != oldLine)
        let current = Task {
            await withCheckedContinuation { continuation in
                waiters.park(after: 449, for: .seconds(30), line: newLine) { continuation.resume(returning: $0) }
            }
        }
        try await eventually { waiters.count == 1 }
        waiters.advance(to: 450)
        #expect(await current.value.ending == .committed)
    }

    @Test func releasingATicketEndsThatWaiterAlone() async throws {
        let tickets = Mutex<[CommitWaiters.Ticket]>([])
        let first = Task { await wait(after: 0, for: .seconds(30)) { ticket in tickets.withLock { $0.append(ticket) } } }
        try await eventually { waiters.count == 1 }
        let second = Task { await wait(after: 0, for: .seconds(30)) }
        try await eventually { waiters.count == 2 }
        waiters.release(try #require(tickets.withLock { $0.first }))
        #expect(await first.value.ending == .released)
        #expect(waiters.count == 1)
        // Released twice, or after its end: nothing happens.
        waiters.release(try #require(tickets.withLock { $0.first }))
        waiters.advance(to: 1)
        #expect(await second.value.ending == .committed)
    }

    @Test func waitersWokenTogetherShareOneRead() async throws {
        let shared = SharedCatchUp()
        let reads = ReadCount()
        let wokenAt = ContinuousClock.now
        let key = SharedCatchUp.Key(after: 0, form: .plain)
        try await withThrowingTaskGroup(of: Int64.self) { group in
            for _ in 0..<50 {
                group.addTask {
                    try await shared.read(key, wokenAt: wokenAt) {
                        reads.value.add(1, ordering: .relaxed)
                        try await Task.sleep(for: .milliseconds(20))
                        return (LogState(head: 3, horizon: 0), CatchUpPage(entries: [], more: false))
                    }.state.head
                }
            }
            for try await head in group { #expect(head == 3) }
        }
        #expect(reads.value.load(ordering: .relaxed) == 1)
        // A waiter woken after that read started reads again: the read may predate its commit.
        _ = try await shared.read(key, wokenAt: .now) {
            reads.value.add(1, ordering: .relaxed)
            return (LogState(head: 4, horizon: 0), CatchUpPage(entries: [], more: false))
        }
        #expect(reads.value.load(ordering: .relaxed) == 2)
    }
}

private final class ReadCount: Sendable {
    let value = Atomic<Int>(0)
}

/// The order in which waits ended.
private final class Endings: Sendable {
    let value = Mutex<[String]>([])
}

private final class Tickets: Sendable {
    let value = Mutex<[CommitWaiters.Ticket]>([])
}
