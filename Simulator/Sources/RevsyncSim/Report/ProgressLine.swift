/// One compact status line per tick of a running soak.
public enum ProgressLine {
    /// `[  42s workload] online 47/50 offline 3 pending 12 head 1843 acked 1200 conflicts 31 errors 7`
    public static func format(_ p: ProgressSnapshot) -> String {
        let elapsed = String(wholeSeconds(p.elapsedSeconds))
        let padded = String(repeating: " ", count: max(0, 4 - elapsed.count)) + elapsed
        return "[\(padded)s \(p.phase)] online \(p.online)/\(p.online + p.offline) offline \(p.offline)"
            + " pending \(p.pending) head \(p.headRevision) acked \(p.acknowledged)"
            + " conflicts \(p.conflicts) errors \(p.errors)"
    }

    /// Int(Double) traps on NaN and out-of-range values; a clock glitch must not end the run.
    static func wholeSeconds(_ seconds: Double) -> Int {
        guard seconds.isFinite, seconds > 0 else { return 0 }
        return Int(min(seconds, 1e9).rounded(.down))
    }
}
