import Synchronization
import RevsyncRules
import RevsyncWire

/// Group commit: concurrent requests hand their change sets over, and one of them, the
/// leader, applies what is queued as one batch in one transaction with one COMMIT, so the
/// WAL flush, the revision lock and the round trips are paid once a batch instead of once a
/// change set.
///
/// The first request to find no leader becomes it. A leader runs one batch of up to
/// `batchSize` change sets in arrival order, then hands the lead to the first request still
/// waiting, so no request waits on others' work for longer than a batch. A request's change
/// sets stay in order: those deferred by their batch (they depend on what an earlier one
/// writes) go first in the next batch, before requests that arrived later.
struct Committer: Sendable {
    let applier: ChangeSetApplier
    /// Learns each batch's entries (the cache): the instance's copy before its requests are
    /// answered, the cache's after (`CommitPublication`).
    let changeLog: any ChangeLog
    let queue: CommitQueue
    /// A leader waits this long before taking its batch, to let more requests join (0: none).
    let batchWait: Duration
    /// Learns each batch's revisions: a batch numbered at or below what this instance saw before
    /// reveals a database that went back (`HistoryWatch`).
    let history: DatasetHistory?
    /// This instance's waiting requests, woken once a batch is published.
    let waiters: CommitWaiters?

    init(
        applier: ChangeSetApplier, changeLog: any ChangeLog, batchSize: Int, batchWait: Duration, history: DatasetHistory? = nil,
        waiters: CommitWaiters? = nil
    ) {
        self.applier = applier
        self.changeLog = changeLog
        queue = CommitQueue(batchSize: min(ChangeSetApplier.maxBatch, max(1, batchSize)))
        self.batchWait = batchWait
        self.history = history
        self.waiters = waiters
    }

    /// Applies a request's change sets; returns their outcomes in order. A refusal under the
    /// device's lock ends the request with that error (its earlier change sets stay applied).
    func apply(_ changeSets: [ChangeSet], device: Device) async throws -> [ApplyOutcome] {
        guard !changeSets.isEmpty else { return [] }
        let items = changeSets.map { applier.item($0, device: device) }
        try await applier.refuseIfUpgradeUnderWay(items)
        let job = CommitJob(items: items)
        var leads = await queue.enqueue(job)
        while true {
            if leads { await leadOneBatch() }
            switch await job.promise.next() {
            case .lead: leads = true
            case .done(let result): return try result.get()
            }
        }
    }

    /// Applies the next batch and hands the lead on; then, in the batch's turn, sends its
    /// entries to the cache and answers the requests it finished without awaiting the cache's
    /// reply, which ends the turn and wakes this instance's waiters.
    ///
    /// The next batch's transaction runs while this one's entries are compressed and written
    /// to the cache: on two cores the two overlap, where one after the other they took a
    /// quarter of each batch's time. Caches learn batches in commit order (`PublicationTurn`).
    /// A request is answered once the instance holds its batch's entries (compressed, in
    /// `RecentValues`) and has sent them to the cache, before the cache's reply: its answer
    /// reads them in memory. The leader's own request too: nobody awaits the reply, which
    /// finishes the batch's turn and wakes the instance's waiters once the cache has the
    /// entries, as every other instance's are woken (by the message on the commits channel), so
    /// that their reads find them there too.
    private func leadOneBatch() async {
        if batchWait > .zero { try? await Task.sleep(for: batchWait) }
        let batch = await queue.takeBatch()
        // Batches of one instance run one after another, and every revision seen before this one
        // started was committed before its transaction: its revisions must all lie above.
        let seenBefore = history?.mark
        let results: [BatchResult]
        do {
            results = try await applier.apply(batch.items)
        } catch {
            // The transaction failed as a whole (PostgreSQL went away, retries ran out): nothing committed.
            await queue.fail(batch, error)
            await queue.handOff()
            return
        }
        let entries = results.compactMap { if case .done(.applied(_, _, let entry)) = $0 { entry } else { nil } }
        if let history, let seenBefore, let first = entries.map(\.revision).min(), let last = entries.map(\.revision).max() {
            history.committed(first: first, last: last, before: seenBefore)
        }
        let settled = await queue.settle(batch, results: results)
        await queue.handOff()
        await settled.turn.wait()
        let publication = await changeLog.didCommit(entries)
        let turn = settled.turn, waiters = self.waiters, last = entries.last?.revision
        publication.whenDone {
            turn.finish()
            if let waiters, let last { waiters.advance(to: last) }
        }
        for (promise, signal) in settled.answers { promise.send(signal) }
    }
}

/// A batch's place in the order in which caches learn what was committed: its publication
/// waits for the one before it to finish. Only the next batch's leader waits on a turn.
final class PublicationTurn: Sendable {
    private struct State {
        /// Dropped once waited for, so that turns do not chain back to the first batch.
        var previous: PublicationTurn?
        var finished = false
        var waiter: CheckedContinuation<Void, Never>?
    }

    private let state: Mutex<State>

    init(after previous: PublicationTurn?) { state = Mutex(State(previous: previous)) }

    /// Returns once the batch before has been published.
    func wait() async {
        guard let previous = state.withLock({ $0.previous }) else { return }
        await withCheckedContinuation { continuation in
            let finished = previous.state.withLock { state in
                if !state.finished { state.waiter = continuation }
                return state.finished
            }
            if finished { continuation.resume() }
        }
        state.withLock { $0.previous = nil }
    }

    func finish() {
        let waiter = state.withLock { state in
            state.finished = true
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume()
    }
}

/// One request's change sets, and how far the batches have got with them.
final class CommitJob: Sendable {
    let items: [BatchItem]
    let promise = CommitPromise()
    private let progress = Mutex<(next: Int, outcomes: [ApplyOutcome])>((0, []))

    init(items: [BatchItem]) { self.items = items }

    var next: Int { progress.withLock { $0.next } }

    /// Records the outcomes of `count` more change sets; true when none is left.
    func advance(_ outcomes: [ApplyOutcome]) -> Bool {
        progress.withLock {
            $0.outcomes += outcomes
            $0.next += outcomes.count
            return $0.next == items.count
        }
    }

    var outcomes: [ApplyOutcome] { progress.withLock { $0.outcomes } }
}

/// The change sets one batch took: which request each came from.
struct CommitBatch: Sendable {
    let jobs: [CommitJob]
    /// Queue order; `job` is the index into `jobs`.
    let items: [BatchItem]
}

/// The requests waiting to be applied, and whether one of them is leading.
actor CommitQueue {
    let batchSize: Int
    private var waiting: [CommitJob] = []
    private var leading = false
    /// The last batch settled: the next one is published after it.
    private var lastTurn: PublicationTurn?

    init(batchSize: Int) { self.batchSize = batchSize }

    /// Queues `job`; true when its request must lead (nobody else is).
    func enqueue(_ job: CommitJob) -> Bool {
        waiting.append(job)
        guard !leading else { return false }
        leading = true
        return true
    }

    /// The next batch: change sets in queue order, up to `batchSize` (a request larger than
    /// the room left is cut, and the batch ends there).
    func takeBatch() -> CommitBatch {
        var jobs: [CommitJob] = []
        var items: [BatchItem] = []
        for job in waiting where items.count < batchSize {
            let rest = job.items[job.next...].prefix(batchSize - items.count)
            for var item in rest {
                item.job = jobs.count
                items.append(item)
            }
            jobs.append(job)
        }
        waiting.removeFirst(jobs.count)
        return CommitBatch(jobs: jobs, items: items)
    }

    /// Records each request's outcomes from `batch`: a request with change sets left goes back
    /// to the front of the queue, in order; those done or failed are returned with their
    /// answers, to be sent once the batch is published, in `turn` (its place in commit order).
    func settle(_ batch: CommitBatch, results: [BatchResult]) -> (turn: PublicationTurn, answers: [(CommitPromise, CommitSignal)]) {
        let turn = PublicationTurn(after: lastTurn)
        lastTurn = turn
        var answers: [(CommitPromise, CommitSignal)] = []
        var unfinished: [CommitJob] = []
        for (index, job) in batch.jobs.enumerated() {
            var outcomes: [ApplyOutcome] = []
            var failure: (any Error)?
            // In order, up to the first change set that did not finish in this batch.
            for (item, result) in zip(batch.items, results) where item.job == index {
                if case .done(let outcome) = result {
                    outcomes.append(outcome)
                    continue
                }
                if case .failed(let error) = result { failure = error }
                break
            }
            let finished = job.advance(outcomes)
            if let failure {
                answers.append((job.promise, .done(.failure(failure))))
            } else if finished {
                answers.append((job.promise, .done(.success(job.outcomes))))
            } else {
                unfinished.append(job)
            }
        }
        waiting.insert(contentsOf: unfinished, at: 0)
        return (turn, answers)
    }

    /// Answers every request of a batch whose transaction failed as a whole.
    func fail(_ batch: CommitBatch, _ error: any Error) {
        for job in batch.jobs { job.promise.send(.done(.failure(error))) }
    }

    /// Gives the lead to the first request waiting, or ends it when none is.
    func handOff() {
        if let next = waiting.first {
            next.promise.send(.lead)
        } else {
            leading = false
        }
    }
}

/// What a waiting request is told: to lead the next batch, or what became of its change sets.
enum CommitSignal: Sendable {
    case lead
    case done(Result<[ApplyOutcome], any Error>)
}

/// Signals to one waiting request, in the order they were sent.
final class CommitPromise: Sendable {
    private struct State {
        var waiter: CheckedContinuation<CommitSignal, Never>?
        var unread: [CommitSignal] = []
    }

    private let state = Mutex(State())

    func send(_ signal: CommitSignal) {
        let waiter = state.withLock { state -> CheckedContinuation<CommitSignal, Never>? in
            guard let waiter = state.waiter else {
                state.unread.append(signal)
                return nil
            }
            state.waiter = nil
            return waiter
        }
        waiter?.resume(returning: signal)
    }

    func next() async -> CommitSignal {
        await withCheckedContinuation { continuation in
            let ready = state.withLock { state -> CommitSignal? in
                guard state.unread.isEmpty else { return state.unread.removeFirst() }
                state.waiter = continuation
                return nil
            }
            if let ready { continuation.resume(returning: ready) }
        }
    }
}
