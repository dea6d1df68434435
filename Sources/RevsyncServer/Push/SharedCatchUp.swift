import RevsyncRules

/// One read of the log for every waiter one commit wakes.
///
/// A commit wakes all the requests waiting at the head together; each would read the same
/// page. A read that started at or after a waiter's wake-up holds everything that woke it,
/// so every waiter woken by then takes that read's result, made for nobody in particular
/// (the public form of every change set). The device's own change sets need their author
/// form, so a waiter among the page's authors reads alone.
actor SharedCatchUp {
    struct Key: Hashable {
        let after: Int64
        let form: EntryForm
    }

    typealias Result = (state: LogState, page: CatchUpPage)

    private struct Read {
        let started: ContinuousClock.Instant
        let task: Task<Result, any Error>
    }

    private var reads: [Key: Read] = [:]
    /// How long a finished read is kept for waiters woken before it started: they are all
    /// running again within milliseconds.
    private let keep: Duration = .seconds(1)

    /// The result of a read of `key` that started at or after `wokenAt`, made by `read` if none did.
    func read(_ key: Key, wokenAt: ContinuousClock.Instant, _ read: @Sendable @escaping () async throws -> Result) async throws -> Result {
        if let shared = reads[key], shared.started >= wokenAt { return try await shared.task.value }
        let now = ContinuousClock.now
        reads = reads.filter { now - $0.value.started < keep }
        // An unstructured task so that every waiter shares one read; it ends with the read.
        let task = Task { try await read() }
        reads[key] = Read(started: now, task: task)
        return try await task.value
    }
}
