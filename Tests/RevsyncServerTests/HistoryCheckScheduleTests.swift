import Testing
@testable import RevsyncServer

/// `HistoryCheckSchedule`: the watch reads the history itself only when no other read (the
/// cache's reconciler's) came for it. Pure: instants are made up, nothing sleeps.
@Suite struct HistoryCheckScheduleTests {
    let start = ContinuousClock.now
    let second = Duration.seconds(1)

    /// Alone, the watch reads an interval after each attempt ends, whether it read or failed,
    /// however long the attempt took.
    @Test func aloneTheWatchReadsAnIntervalAfterEachAttempt() {
        var schedule = HistoryCheckSchedule(interval: second, startingAt: start)
        #expect(schedule.pause(lastRead: nil, now: start) == second)
        // A read that succeeded (its read taken 3 ms in, the attempt ended at 4 ms).
        let read = start + second + .milliseconds(3)
        schedule.attempted(at: read + .milliseconds(1), lastRead: read)
        #expect(schedule.pause(lastRead: read, now: read + .milliseconds(1)) == second)
        // A failed read leaves the last read as it was: still an interval on, not at once.
        schedule.attempted(at: start + .seconds(3), lastRead: read)
        #expect(schedule.pause(lastRead: read, now: start + .seconds(3)) == second)
        // One that failed after waiting 5 s for PostgreSQL: an interval after it, not back to back.
        schedule.attempted(at: start + .seconds(9), lastRead: read)
        #expect(schedule.pause(lastRead: read, now: start + .seconds(9)) == second)
    }

    /// The reconciler reads on a timer of the same interval, each read a little over an
    /// interval after the last (its sleep, then its round trips). Every one of its reads is
    /// due, and the watch never is while they come.
    @Test func aReconcilerOnTheSameIntervalServesEveryCheckAndTheWatchReadsNothing() {
        let schedule = HistoryCheckSchedule(interval: second, startingAt: start)
        var lastRead: ContinuousClock.Instant? = start
        for tick in 1...1000 {
            // 1 s plus 0.5-5 ms, varying.
            let now = lastRead! + second + .microseconds(500 + (tick * 7919) % 4500)
            #expect(HistoryCheckSchedule.isDue(lastRead: lastRead, now: now, interval: second, period: second))
            // Just before this read, the watch was not due.
            #expect(schedule.pause(lastRead: lastRead, now: now - .microseconds(1)) > .zero)
            lastRead = now
        }
    }

    /// A reconciler on a shorter timer serves one check an interval, not each of its reads.
    @Test func aFasterReconcilerServesACheckOnceAnInterval() {
        let period = Duration.milliseconds(100)
        var lastRead = start
        var served = 0
        var now = start
        for _ in 0..<100 {
            now += period + .milliseconds(1)
            if HistoryCheckSchedule.isDue(lastRead: lastRead, now: now, interval: second, period: period) {
                served += 1
                lastRead = now
            }
        }
        // 10.1 s of reads: every tenth serves a check (1.01 s apart), no two neighbours do.
        #expect(served == 10)
        #expect(!HistoryCheckSchedule.isDue(lastRead: now, now: now + .milliseconds(940), interval: second, period: period))
        #expect(HistoryCheckSchedule.isDue(lastRead: now, now: now + .milliseconds(950), interval: second, period: period))
    }

    /// Once the other reads stop (Redis down, the reconciler stalled), the watch reads a
    /// quarter of an interval after the last of them, then every interval on its own.
    @Test func whenTheOtherReadsStopTheWatchTakesOver() {
        var schedule = HistoryCheckSchedule(interval: second, startingAt: start)
        let last = start + .milliseconds(900)
        #expect(schedule.pause(lastRead: last, now: start + .milliseconds(950)) == .milliseconds(1200))
        let took = last + .milliseconds(1250)
        #expect(schedule.pause(lastRead: last, now: took) == .zero)
        schedule.attempted(at: took + .milliseconds(3), lastRead: took + .milliseconds(2))
        #expect(schedule.pause(lastRead: took + .milliseconds(2), now: took + .milliseconds(3)) == second)
    }

    /// Before any read (the start-up check failed) a read is due at once.
    @Test func withNoReadYetACheckIsDue() {
        #expect(HistoryCheckSchedule.isDue(lastRead: nil, now: start, interval: second, period: second))
        #expect(!HistoryCheckSchedule.isDue(lastRead: start, now: start + .milliseconds(499), interval: second, period: second))
    }
}
