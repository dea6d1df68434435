import Logging
import NIOCore
import RevsyncRules
import RevsyncWire

/// What an exchange answers: its body now, or later, after a wait for a commit.
package enum SyncAnswer: Sendable {
    case ready(ByteBuffer)
    case waiting(PendingSync)
}

/// One `/sync` exchange: checks the envelope, applies the change sets in order,
/// then answers with the catch-up, acknowledgements and corrective sets.
package struct SyncService: Sendable {
    let committer: Committer
    let changeLog: any ChangeLog
    let corrections: CorrectionBuilder
    let limits: ServerSettings.Limits
    let metrics: ServerMetrics
    /// Nil: requests never wait.
    let longPoll: LongPoll?
    /// The database's history id, checked against each request's and carried by each answer
    /// (`HistoryRules`); nil: neither.
    let history: HistoryWatch?

    package init(
        changeSets: any ChangeSetStore, changeLog: any ChangeLog, records: any RecordStore, schema: DatasetSchema,
        limits: ServerSettings.Limits, metrics: ServerMetrics, commitBatchSize: Int = ChangeSetApplier.maxBatch, commitBatchWait: Duration = .zero,
        longPoll: LongPoll? = nil, history: HistoryWatch? = nil
    ) {
        committer = Committer(
            applier: ChangeSetApplier(store: changeSets, schema: schema, limits: limits), changeLog: changeLog,
            batchSize: commitBatchSize, batchWait: commitBatchWait, history: history?.history, waiters: longPoll?.waiters)
        corrections = CorrectionBuilder(records: records, schema: schema)
        self.changeLog = changeLog
        self.limits = limits
        self.metrics = metrics
        self.longPoll = longPoll
        self.history = history
    }

    /// The response body of one exchange, awaited: a request that waits for a commit holds its task.
    /// - Parameters:
    ///   - gzip: answer with one gzip member (the change sets as compressed at commit, where the log has them).
    ///   - clientGone: completes when the client closes its connection; a waiting request then ends.
    ///   - stillAuthorized: throws when the device was revoked meanwhile (checked after a wait, before its answer is read).
    package func sync(
        _ request: SyncRequest, device: Device, gzip: Bool = false, clientGone: EventLoopFuture<Void>? = nil,
        stillAuthorized: (@Sendable () async throws -> Void)? = nil, logger: Logger
    ) async throws -> ByteBuffer {
        switch try await exchange(request, device: device, gzip: gzip, stillAuthorized: stillAuthorized, logger: logger) {
        case .ready(let body): return body
        case .waiting(let pending): return try await pending.answer(clientGone: clientGone)
        }
    }

    /// One exchange: its answer, or a request waiting for a commit whose answer comes later
    /// (`PendingSync`), which the caller starts and holds.
    package func exchange(
        _ request: SyncRequest, device: Device, gzip: Bool = false, stillAuthorized: (@Sendable () async throws -> Void)? = nil,
        logger: Logger
    ) async throws -> SyncAnswer {
        try check(request)
        if namesAnotherHistory(request) { try await confirmHistory(request) }
        // Two paths, each its own function: an async function's frame is as large as its
        // largest path, and the request's task keeps the high-water mark of its frames for as
        // long as its connection lives (a waiting device's connection included).
        return request.changeSets.isEmpty
            ? try await catchUp(request, device: device, gzip: gzip, stillAuthorized: stillAuthorized)
            : .ready(try await write(request, device: device, gzip: gzip, logger: logger))
    }

    /// The request's own limits and the order of its seqs. Synchronous and apart, like the
    /// two paths below, so that `exchange`, inlined into its caller, adds nothing to that frame.
    @inline(never)
    private func check(_ request: SyncRequest) throws {
        try RequestRules.check(request, maxChangeSets: limits.maxChangeSetsPerRequest, maxOperations: limits.maxOperationsPerRequest)
        // The rest of the seq rules are checked under the device's lock, in the batch: a gap or a
        // reused seq refuses the request before any of its change sets applies.
        try SeqRules.checkOrder(request.changeSets.compactMap(\.seq))
    }

    /// Whether the request names another history id than this instance holds. Apart, like
    /// `check`, so that `exchange`'s frame holds a `Bool`, not a copy of the watch.
    @inline(never)
    private func namesAnotherHistory(_ request: SyncRequest) -> Bool {
        guard let history, let claimed = request.history else { return false }
        return claimed != history.history.id
    }

    /// A request naming another history id than this instance holds: the database's is read
    /// again (another instance may have renewed it, or this one lags), then the rule decides.
    /// An id this instance replaced is refused without the read: after a renewal every device
    /// names it once, nearly all at once (the waiters, answered by the renewal, ask again at
    /// once), and each of those requests was a PostgreSQL query.
    @inline(never)
    private func confirmHistory(_ request: SyncRequest) async throws {
        guard let history else { return }
        if let claimed = request.history, history.history.replacedEarlier(claimed) {
            try HistoryRules.check(claimed: claimed, current: history.history.id)
        }
        try HistoryRules.check(claimed: request.history, current: try await history.check())
    }

    private var catchUpLimits: CatchUpLimits {
        CatchUpLimits(maxChangeSets: limits.catchUpMaxChangeSets, maxBytes: limits.catchUpMaxBytes)
    }

    /// Nothing to apply: the state and the page in one read of the log, or a wait for a commit.
    @inline(never)
    private func catchUp(
        _ request: SyncRequest, device: Device, gzip: Bool, stillAuthorized: (@Sendable () async throws -> Void)?
    ) async throws -> SyncAnswer {
        let started = ContinuousClock.now
        let maxRevision = request.maxRevision
        let form: EntryForm = gzip ? .deflated : .plain
        // Before the read: a rewind during it ends the wait its empty page would start.
        let line = longPoll?.waiters.line
        var (state, page) = try await changeLog.catchUp(after: maxRevision, for: device, limits: catchUpLimits, form: form)
        if maxRevision > state.head {
            // A cached head may lag (or have been set back): ask PostgreSQL before refusing.
            state = try await changeLog.authoritativeState()
            try CatchUpRules.checkEnvelope(maxRevision: maxRevision, state: state)
            page = try await changeLog.entries(after: maxRevision, through: state.head, for: device, limits: catchUpLimits, form: form, own: [])
        }
        return try answer(
            page, state: state, request: request, device: device, gzip: gzip, started: started, line: line, stillAuthorized: stillAuthorized)
    }

    @inline(never)
    private func answer(
        _ page: CatchUpPage, state: LogState, request: SyncRequest, device: Device, gzip: Bool, started: ContinuousClock.Instant,
        line: CommitWaiters.Line?, stillAuthorized: (@Sendable () async throws -> Void)?
    ) throws -> SyncAnswer {
        try CatchUpRules.checkEnvelope(maxRevision: request.maxRevision, state: state)
        if page.entries.isEmpty, let longPoll, let line, let wait = longPoll.granted(request.wait) {
            return .waiting(PendingSync(
                maxRevision: request.maxRevision, device: device, gzip: gzip, limits: catchUpLimits, wait: wait, emptyPage: page,
                stillAuthorized: stillAuthorized, service: self, longPoll: longPoll, line: line))
        }
        metrics.recordCatchUp(changeSets: page.entries.count, source: page.source, duration: ContinuousClock.now - started)
        return .ready(respond(page, maxRevision: request.maxRevision, acks: [], correctives: [], gzip: gzip))
    }

    /// Applies the request's change sets, then answers with what the device missed, its
    /// acknowledgements and corrective sets.
    @inline(never)
    private func write(_ request: SyncRequest, device: Device, gzip: Bool, logger: Logger) async throws -> ByteBuffer {
        var state = try await changeLog.recentState()
        if request.maxRevision > state.head { state = try await changeLog.authoritativeState() }
        try CatchUpRules.checkEnvelope(maxRevision: request.maxRevision, state: state)

        let applying = ContinuousClock.now
        let outcomes = try await committer.apply(request.changeSets, device: device)
        // Every revision an outcome names (new, or repeated) is the device's own. This instance's
        // waiters are woken by the committer, once the batch is published.
        let own = outcomes.compactMap(\.revision)
        // A change set's time is its request's: it commits with the rest of its batch.
        recordApplied(request.changeSets, outcomes, duration: ContinuousClock.now - applying, logger: logger)

        let started = ContinuousClock.now
        let head = max(state.head, own.max() ?? 0)
        let page = try await changeLog.entries(
            after: request.maxRevision, through: head, for: device, limits: catchUpLimits, form: gzip ? .deflated : .plain, own: Set(own))
        let oldAcks = try await repeatedAcknowledgements(outcomes, maxRevision: request.maxRevision, device: device)
        metrics.recordCatchUp(changeSets: page.entries.count, source: page.source, duration: ContinuousClock.now - started)
        let correctives = try await correctiveSets(outcomes, device: device)
        return respond(page, maxRevision: request.maxRevision, acks: oldAcks, correctives: correctives, gzip: gzip)
    }

    @inline(never)
    private func recordApplied(_ changeSets: [ChangeSet], _ outcomes: [ApplyOutcome], duration: Duration, logger: Logger) {
        for (changeSet, outcome) in zip(changeSets, outcomes) {
            metrics.recordApply(outcome, changeSet: changeSet, duration: duration)
            logger.debug("change set handled", metadata: ["seq": "\(changeSet.seq.map(String.init) ?? "-")", "outcome": "\(outcome)"])
        }
    }

    /// The page after a wake-up: one read shared by every waiter the same commit woke, unless
    /// the device made one of its change sets (it gets those in its author form).
    func wokenCatchUp(
        _ longPoll: LongPoll, after revision: Int64, wokenAt: ContinuousClock.Instant, device: Device, limits: CatchUpLimits, form: EntryForm
    ) async throws -> (state: LogState, page: CatchUpPage) {
        let changeLog = self.changeLog
        let shared = try await longPoll.shared.read(.init(after: revision, form: form), wokenAt: wokenAt) {
            try await changeLog.catchUp(after: revision, for: .nobody, limits: limits, form: form)
        }
        if let authors = shared.page.authors, !authors.contains(device.id) { return shared }
        return try await changeLog.catchUp(after: revision, for: device, limits: limits, form: form)
    }

    @inline(never)
    func respond(_ page: CatchUpPage, maxRevision: Int64, acks: [[UInt8]], correctives: [[UInt8]], gzip: Bool) -> ByteBuffer {
        // Sized for what the answer will hold: a gzip answer of pieces compressed at commit is
        // about their size (a fiftieth of the JSON on the bench's log), not the JSON's.
        let extra = (acks + correctives).reduce(0) { $0 + $1.count } + 16 * (acks.count + correctives.count + page.entries.count)
        let size = page.entries.reduce(0) { $0 + (gzip ? $1.body.heldBytes : $1.size) } + extra
        var writer = SyncResponseWriter(gzip: gzip, capacity: size)
        for ack in acks { writer.append(ack) }
        for entry in page.entries { writer.append(entry.body) }
        for corrective in correctives { writer.append(corrective) }
        if let last = page.entries.last { metrics.observeHead(last.revision) }
        return writer.finish(maxRevision: page.entries.last?.revision ?? maxRevision, more: page.more, history: history?.history.id)
    }

    /// Acknowledgements the device asks for again although it is past them (after a
    /// re-bootstrap), oldest first; those whose log entry was pruned are rebuilt.
    private func repeatedAcknowledgements(_ outcomes: [ApplyOutcome], maxRevision: Int64, device: Device) async throws -> [[UInt8]] {
        let old = outcomes.compactMap(\.revision).filter { $0 <= maxRevision }
        guard !old.isEmpty else { return [] }
        var acks: [(revision: Int64, bytes: [UInt8])] = try await changeLog.authorEntries(old, for: device).compactMap {
            guard case .plain(let bytes) = $0.body else { return nil }
            return ($0.revision, Array(bytes.readableBytesView))
        }
        for case .repeated(let revision, let seq) in outcomes where old.contains(revision) && !acks.contains(where: { $0.revision == revision }) {
            acks.append((revision, try await corrections.rebuiltAcknowledgement(seq: seq, revision: revision, device: device)))
        }
        return acks.sorted { $0.revision < $1.revision }.map(\.bytes)
    }

    /// A fresh corrective set for every rejected change set, in request order. Each is bounded
    /// by `maxCorrectiveBytes`, and all of them by `maxCorrectiveBytesPerResponse`: past that,
    /// the rest are re-bootstrap instructions, so a thousand rejected deletes of large parents
    /// cost a bounded amount of memory.
    private func correctiveSets(_ outcomes: [ApplyOutcome], device: Device) async throws -> [[UInt8]] {
        var correctives: [[UInt8]] = []
        var room = limits.maxCorrectiveBytesPerResponse
        for outcome in outcomes {
            switch outcome {
            case .rejected(let reason, let changeSet), .repeatedRejection(let reason, let changeSet):
                let limit = min(limits.maxCorrectiveBytes, room)
                let corrective = limit > 0
                    ? try await corrections.corrective(for: changeSet, reason: reason, device: device, maxBytes: limit)
                    : CorrectiveSet.resync(seq: changeSet.seq, reason: reason, limit: limits.maxCorrectiveBytesPerResponse)
                room = max(0, room - corrective.count)
                correctives.append(corrective)
            case .applied, .repeated:
                continue
            }
        }
        return correctives
    }
}
