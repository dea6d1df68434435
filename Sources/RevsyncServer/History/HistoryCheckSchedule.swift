/// When `HistoryWatch` reads the database itself, and when a read another made (the cache's
/// reconciler, `HeadReading`) serves its check instead.
///
/// The reconciler reads the same row on a timer of its own. Were the watch to read whenever
/// an interval had passed since the last read, two timers of one period would each find the
/// other's read a hair too old about as often as not, and read twice. So the watch waits a
/// quarter of an interval longer after another's read, and another's read serves once the
/// last is half of its own period short of an interval old.
struct HistoryCheckSchedule: Sendable {
    let interval: Duration
    /// When the watch's last attempt to read ended, and the read it made then (nil: none, or it failed).
    var attempted: ContinuousClock.Instant
    var ownRead: ContinuousClock.Instant?

    init(interval: Duration, startingAt now: ContinuousClock.Instant) {
        self.interval = interval
        attempted = now
        ownRead = nil
    }

    /// How long from `now` until the watch reads, `lastRead` being the last read of any check:
    /// an interval after its own last attempt ended, and while another read since, a quarter
    /// of an interval more after that read.
    func pause(lastRead: ContinuousClock.Instant?, now: ContinuousClock.Instant) -> Duration {
        var due = attempted + interval
        if let lastRead, lastRead != ownRead { due = max(due, lastRead + interval + interval / 4) }
        return due - now
    }

    /// The watch's attempt to read ended at `now`; `lastRead` is the last read then (its own when it succeeded).
    mutating func attempted(at now: ContinuousClock.Instant, lastRead: ContinuousClock.Instant?) {
        attempted = now
        ownRead = lastRead
    }

    /// Whether a read made at `now` on a timer of `period` serves a check: no read for an
    /// interval, less half that period.
    static func isDue(lastRead: ContinuousClock.Instant?, now: ContinuousClock.Instant, interval: Duration, period: Duration) -> Bool {
        guard let lastRead else { return true }
        return now - lastRead + period / 2 >= interval
    }
}
