import GRDB
import Logging
import RevsyncWire

extension SyncEngine {
    /// Syncs until the device has sent everything pending and received
    /// everything the server has: bootstraps a new device first, sends the
    /// outbox (in batches), applies each response in one local transaction, follows
    /// `more`, and sends edits made meanwhile.
    ///
    /// Transient failures (timeouts, connection errors, 5xx, 503) are retried
    /// with backoff and jitter up to `retry.maxAttempts`; a resend carries the
    /// same `seq`s, so the server never applies a change set twice.
    /// `snapshot_required`, `revision_ahead` and `history_changed` (or an answer of another
    /// history than the request named) re-bootstrap (pending changes kept),
    /// `sequence_gap` renumbers the outbox, `seq_reused` renumbers the change sets
    /// made after the file's backup (and renames their temporary ids), `too_large`
    /// sends fewer change sets. A corrective set with `"resync": true` (a repair too
    /// large to send) re-bootstraps too, once per response, after the rejected change
    /// set has left the outbox.
    /// Other errors are thrown. Only one sync runs at a time; a second call waits.
    @discardableResult
    public func syncOnce() async throws -> SyncReport {
        try checkOpen()
        await acquireSyncSlot()
        defer { releaseSyncSlot() }
        return try await performRound()
    }

    /// Loads the server's schema and a snapshot of its data, replacing the local
    /// records but keeping pending local changes on top. `syncOnce()` does this
    /// by itself for a new device and when the server asks for it.
    public func bootstrap() async throws {
        try checkOpen()
        let token = try requireToken()
        await acquireSyncSlot()
        defer { releaseSyncSlot() }
        var report = SyncReport()
        try await retrying(&report) { try await self.bootstrapLocked(token: token) }
    }

    /// Syncs now and after every local change, and in between keeps up with
    /// the server until the task is cancelled: with a long-poll of
    /// `configuration.wait` (`waitForServerChanges(upTo:)`), so that other
    /// devices' changes arrive as they are committed, or, with a wait of zero,
    /// with a catch-up every `pollInterval`. Transient failures wait and try
    /// again; errors retrying cannot fix (401, a request the server refuses as
    /// malformed, a proxy's 413 for a lone change set) are thrown. A change set the
    /// server itself refuses as too large even alone is dropped with a notification
    /// (`UndeliverableChangeSet`).
    public func run() async throws {
        var failures = 0
        var longPollFailures = 0
        var roundNeeded = true
        while !Task.isCancelled, !closed {
            if roundNeeded {
                do {
                    try await syncOnce()
                    failures = 0
                } catch is CancellationError {
                    return
                } catch let error as SyncTransportError where error.isRetryable {
                    failures += 1
                    logger.warning("sync round failed; will retry", metadata: ["error": "\(error)", "failures": "\(failures)"])
                    try? await configuration.sleep(configuration.retry.delay(forAttempt: failures, jitter: configuration.random()))
                    continue
                } catch DeviceError.unansweredChangeSets(let seqs) {
                    failures += 1
                    logger.warning("server left change sets unanswered; will resend", metadata: ["seqs": "\(seqs)"])
                    try? await configuration.sleep(configuration.retry.delay(forAttempt: failures, jitter: configuration.random()))
                    continue
                } catch DeviceError.unknownNamesInResponse(let names) {
                    // A rolling schema upgrade: an upgraded instance answered, one not upgraded yet gave
                    // the schema. Nothing was applied; the next round asks again and they agree.
                    failures += 1
                    logger.warning("the server's schema lacks names its answer used (a schema upgrade under way?); will retry", metadata: [
                        "names": "\(names.joined(separator: ", "))", "failures": "\(failures)",
                    ])
                    try? await configuration.sleep(configuration.retry.delay(forAttempt: failures, jitter: configuration.random()))
                    continue
                } catch DeviceError.closed {
                    return
                }
            }
            roundNeeded = true
            guard configuration.wait > .zero else {
                await waitForWork(timeout: configuration.pollInterval)
                continue
            }
            do {
                switch try await waitForServerChanges(upTo: configuration.wait) {
                case .received, .nothingNew(held: true):
                    // Caught up: the next long-poll starts from here (and ends at once if something is pending).
                    roundNeeded = false
                case .nothingNew(held: false):
                    // Answered at once with nothing: a server that does not hold requests. Poll instead.
                    await waitForWork(timeout: configuration.pollInterval)
                    roundNeeded = false
                case .interrupted:
                    break
                }
                longPollFailures = 0
            } catch is CancellationError {
                return
            } catch DeviceError.closed {
                return
            } catch DeviceError.unansweredChangeSets(let seqs) {
                // As in a round (a long-poll's answer cut by `more` is followed by a round, which
                // sends what is pending): wait, and the next round sends them again.
                longPollFailures += 1
                logger.warning("server left change sets unanswered; will resend", metadata: ["seqs": "\(seqs)"])
                try? await configuration.sleep(configuration.retry.delay(forAttempt: longPollFailures, jitter: configuration.random()))
            } catch DeviceError.unknownNamesInResponse(let names) {
                // As in a round: a schema upgrade under way; nothing was applied, and the next round asks again.
                longPollFailures += 1
                logger.warning("the server's schema lacks names a long-poll's answer used (a schema upgrade under way?); will retry", metadata: [
                    "names": "\(names.joined(separator: ", "))", "failures": "\(longPollFailures)",
                ])
                try? await configuration.sleep(configuration.retry.delay(forAttempt: longPollFailures, jitter: configuration.random()))
            } catch let error as SyncTransportError where error.isRetryable {
                // Counted apart from rounds: a round succeeding in between must not reset the backoff
                // of a long-poll that keeps failing (a proxy that cuts held requests, say).
                longPollFailures += 1
                logger.warning("long-poll failed; will retry", metadata: ["error": "\(error)", "failures": "\(longPollFailures)"])
                try? await configuration.sleep(configuration.retry.delay(forAttempt: longPollFailures, jitter: configuration.random()))
            } catch let error as SyncTransportError {
                if case .unauthorized = error { throw error }
                if case .fail = SyncRecovery.decide(for: error, changeSetCount: 0) {
                    // A server that refuses the wait itself: poll as before.
                    logger.warning("long-poll refused; polling instead", metadata: ["error": "\(error)"])
                    await waitForWork(timeout: configuration.pollInterval)
                }
                // Anything else (a snapshot needed, a reset server) is the round's to handle.
            }
        }
    }

    // MARK: The round

    func performRound() async throws -> SyncReport {
        let token = try requireToken()
        var report = SyncReport()
        // Once per engine instance (and token): a file opened here may be older than
        // the server's view of the device.
        if !countersChecked { try await learnServerCounters(token: token) }
        // A new device, or a resync the server asked for that did not finish (the
        // snapshot failed, or the app stopped in between).
        let snapshotNeeded = try await needsSnapshot()
        if layout == nil || snapshotNeeded {
            try await retrying(&report) { try await self.bootstrapLocked(token: token) }
            report.bootstrapped = true
        }
        var limit = max(1, configuration.maxChangeSetsPerRequest)
        let maxOperations = max(1, configuration.maxOperationsPerRequest)
        var attempt = 0
        var renumbered = false
        var rebootstraps = 0
        // seq_reused: the search for the first impostor, its probes' revision, and a
        // bound against a server that keeps refusing (each search makes progress).
        var search: ReusedSeqSearch?
        var probeRevision: Int64 = 0
        var searches = 0
        // Change sets the server refused as too large even alone, dropped this round: their
        // notifications are delivered however the round ends, once the snapshot that undoes
        // them is loaded when it ends well (one for all of them).
        var undeliverable: [ConflictNotification] = []
        defer { publishConflicts(undeliverable) }
        while true {
            try Task.checkCancellation()
            try checkOpen()
            let layout = try requireLayout()
            if search == nil, searches < Self.maxReusedSeqSearches, let needed = try await searchNeededBeforeSending(limit: limit) {
                searches += 1
                search = needed
            }
            var probing: ClosedRange<Int64>?
            if var current = search {
                switch current.next(window: limit) {
                case .probe(let seqs):
                    probing = seqs
                    search = current
                case .firstReused(let seq):
                    search = nil
                    if let last = current.provenRetries.last { provenRetriesThrough = max(provenRetriesThrough, last) }
                    try await repairReusedSeqs(from: seq)
                    continue
                case .noneReused:
                    search = nil
                    if let last = current.suspects.last { provenRetriesThrough = max(provenRetriesThrough, last) }
                    continue
                }
            }
            let request = try await database.writer.read { [limit, probing, probeRevision] db in
                let store = SQLiteRecordStore(db, layout: layout)
                guard let probing else {
                    return try RequestBuilder.build(from: store, schema: layout.schema, limit: limit, maxOperations: maxOperations)
                }
                let maxRevision = max(probeRevision, try store.meta().maxRevision)
                return try RequestBuilder.probe(from: store, schema: layout.schema, seqs: probing, maxRevision: maxRevision)
            }
            report.requests += 1
            report.sentChangeSets += request.changeSets.count
            let response: SyncResponse
            do {
                response = try await transport.sync(request, token: token)
                // Closed while the request was out: `DeviceError.closed`, which `run()` ends on
                // quietly, not the closed database's error from applying the answer (the server
                // repeats its outcome to the next request).
                try checkOpen()
                try ResponseApplier.checkHistory(of: response, to: request)
            } catch let error as SyncTransportError {
                switch SyncRecovery.decide(for: error, changeSetCount: request.changeSets.count) {
                case .retry(let after):
                    attempt += 1
                    if let maxAttempts = configuration.retry.maxAttempts, attempt >= maxAttempts { throw error }
                    report.retries += 1
                    let delay = after ?? configuration.retry.delay(forAttempt: attempt, jitter: configuration.random())
                    logger.debug("sync failed; retrying", metadata: ["error": "\(error)", "attempt": "\(attempt)", "delay": "\(delay)"])
                    try await configuration.sleep(delay)
                case .bootstrap, .bootstrapAnyRevision:
                    // Twice per round at most: a server that keeps asking is not helped by a loop. The
                    // second time from the JSON snapshot, read at the head: the SQLite file may be
                    // older than the log's horizon (a retention shorter than the file's rebuild
                    // interval), and loading it again would be refused again.
                    guard rebootstraps < 2 else { throw error }
                    rebootstraps += 1
                    logger.info("server asked for a new snapshot", metadata: ["error": "\(error)", "time": "\(rebootstraps)"])
                    let anyRevision = SyncRecovery.decide(for: error, changeSetCount: 0) == .bootstrapAnyRevision
                    let fromFile = rebootstraps == 1
                    try await retrying(&report) { try await self.bootstrapLocked(token: token, anyRevision: anyRevision, fromFile: fromFile) }
                    report.bootstrapped = true
                case .renumber(let expected):
                    guard !renumbered, try await renumberOutbox(from: expected) else { throw error }
                    renumbered = true
                    // The server forgot the device's seqs from `expected` on: none of those is a retry any more.
                    // `expected` counts the request's new seqs before the gap, so the server's own last seq
                    // is at least the one before the run of sent seqs that ends just below it.
                    let sent = Set(request.changeSets.compactMap(\.seq))
                    var last = expected - 1
                    while sent.contains(last) { last -= 1 }
                    serverCounters = ServerCounters(lastSeq: last, lowestTemporaryId: serverCounters?.lowestTemporaryId ?? 0)
                    provenRetriesThrough = 0
                    search = nil
                    logger.warning("server expects another seq; renumbered pending change sets", metadata: ["expected": "\(expected)"])
                case .repairReusedSeqs(let expected, let lowestTemporaryId, let firstReused):
                    attempt = 0
                    serverCounters = ServerCounters(lastSeq: expected - 1, lowestTemporaryId: lowestTemporaryId)
                    if probing != nil {
                        search?.record(refused: true, firstReused: firstReused)
                        continue
                    }
                    // The impostor is among the change sets of this request the server has handled.
                    let refused = request.changeSets.compactMap(\.seq).filter { $0 > provenRetriesThrough && $0 < expected }
                    searches += 1
                    guard let last = refused.last, searches <= Self.maxReusedSeqSearches else { throw error }
                    search = ReusedSeqSearch(suspects: try await unprovenSuspects(below: expected), refusedThrough: last, firstReused: firstReused)
                    logger.warning("server refused a reused seq; looking for the first new change set", metadata: ["expected": "\(expected)"])
                case .shrinkBatch:
                    limit = max(1, request.changeSets.count / 2)
                case .fail:
                    // A proxy's 413 (`byServer` false) is the proxy's limit to mend, not the change set's.
                    guard case .tooLarge(let message, true) = error, request.changeSets.count == 1,
                        let seq = request.changeSets.first?.seq
                    else { throw error }
                    // A probe's suspect no request can carry (the limits were lowered after it was
                    // handled) goes the same way; gone from the outbox, it counts for the search as
                    // accepted, which moves the search past it.
                    if probing != nil { search?.record(refused: false) }
                    // Seqs the server is known to have handled keep their numbers: renumbering
                    // over them would make a retry look like another change set.
                    let handledThrough = serverCounters.map { max($0.lastSeq, provenRetriesThrough) }
                    let dropped = try await dropUndeliverable(seq: seq, serverMessage: message, serverHandledThrough: handledThrough)
                    undeliverable += dropped
                    report.conflicts += dropped
                    limit = max(1, configuration.maxChangeSetsPerRequest)
                }
                continue
            }
            attempt = 0
            if probing != nil {
                // Thrown away, not applied: see ReusedSeqSearch.
                search?.record(refused: false)
                probeRevision = max(probeRevision, response.maxRevision)
                continue
            }

            let outcome = try await applyAnswer(response, to: request, token: token, report: &report)
            if outcome.more { continue }
            let pending = try await pendingSeqs()
            let sent = Set(request.changeSets.compactMap(\.seq))
            let unanswered = pending.filter(sent.contains)
            guard unanswered.isEmpty else { throw DeviceError.unansweredChangeSets(unanswered) }
            // Edits made while the request was in flight, or the rest of a batch.
            if pending.isEmpty {
                if !undeliverable.isEmpty {
                    logger.info("dropped change sets the server refuses as too large; loading a snapshot", metadata: [
                        "seqs": "\(undeliverable.compactMap(\.seq))",
                    ])
                    try await loadSnapshotAfterRejections(token: token, report: &report)
                }
                return report
            }
        }
    }

    /// Searches for reused seqs one round may start: each one ends in a repair
    /// that moves change sets past the server's seqs, or proves them retries, so a
    /// server that keeps refusing after that many is inconsistent.
    static var maxReusedSeqSearches: Int { 8 }

    /// Applies an answer of `/sync` (`apply`), adds it to `report`, publishes its changes
    /// and conflicts, and loads a snapshot when a corrective set says `"resync": true`.
    func applyAnswer(_ response: SyncResponse, to request: SyncRequest, token: String, report: inout SyncReport) async throws -> SyncOutcome {
        let outcome = try await apply(response, to: request, token: token)
        report.acknowledged += outcome.acknowledged
        report.conflicts += outcome.conflicts
        report.receivedChangeSets += outcome.committedChangeSets
        report.maxRevision = outcome.maxRevision
        publishChanges(outcome)
        configuration.revisionObserver?(outcome.maxRevision)
        if outcome.needsResync {
            // Conflicts are delivered once the snapshot has undone the rejected edits;
            // if it fails they are stored anyway, and the next round loads it first.
            defer { publishConflicts(outcome.conflicts) }
            let seqs = outcome.conflicts.filter(\.resync).compactMap(\.seq)
            logger.info("the server's repair was too large to send; loading a snapshot", metadata: ["seqs": "\(seqs)"])
            try await loadSnapshotAfterRejections(token: token, report: &report)
        } else {
            publishConflicts(outcome.conflicts)
        }
        return outcome
    }

    /// Reloads the records from a snapshot after change sets left the outbox rejected with
    /// `"resync": true` or dropped as undeliverable: the snapshot undoes their local edits,
    /// and the pending change sets are replayed on top.
    func loadSnapshotAfterRejections(token: String, report: inout SyncReport) async throws {
        var loaded: Int64 = 0
        try await retrying(&report) { loaded = try await self.bootstrapLocked(token: token) }
        report.bootstrapped = true
        report.maxRevision = max(report.maxRevision, loaded)
    }

    /// A change set the server refuses as too large even alone (`UndeliverableChangeSet`):
    /// dropped, its notification stored, and the records marked for a snapshot (which the
    /// round loads before it ends well, or the next round first).
    /// - Returns: the stored notification, none when the change set is no longer pending.
    func dropUndeliverable(seq: Int64, serverMessage: String, serverHandledThrough: Int64?) async throws -> [ConflictNotification] {
        let layout = try requireLayout()
        let conflicts = try await database.writer.write { db in
            let store = SQLiteRecordStore(db, layout: layout)
            guard let conflict = try UndeliverableChangeSet.drop(seq: seq, from: store, serverMessage: serverMessage, serverHandledThrough: serverHandledThrough)
            else { return [ConflictNotification]() }
            return try store.saveConflicts([conflict])
        }
        if !conflicts.isEmpty {
            logger.error("the server refuses a change set as too large even alone; dropped it", metadata: ["seq": "\(seq)", "message": "\(serverMessage)"])
        }
        return conflicts
    }

    /// Applies the response to `request` in one SQLite transaction, first installing a
    /// newer schema if the response uses names the current one lacks.
    func apply(_ response: SyncResponse, to request: SyncRequest, token: String) async throws -> SyncOutcome {
        var layout = try requireLayout()
        if !layout.schema.unknownNames(in: response).isEmpty {
            layout = try await install(try await transport.schema(token: token))
            let unknown = layout.schema.unknownNames(in: response)
            guard unknown.isEmpty else { throw DeviceError.unknownNamesInResponse(unknown) }
        }
        return try await database.writer.write { [layout] db in
            let store = SQLiteRecordStore(db, layout: layout)
            let sent = Set(request.changeSets.compactMap(\.seq))
            var outcome = try ResponseApplier(schema: layout.schema).apply(response, to: store, sent: sent)
            outcome.conflicts = try store.saveConflicts(outcome.conflicts)
            return outcome
        }
    }

    func publishChanges(_ outcome: SyncOutcome) {
        if !outcome.changes.isEmpty || !outcome.idMappings.isEmpty {
            changeBroadcaster.publish(ChangeEvent(origin: .sync, records: outcome.changes, idMappings: outcome.idMappings))
        }
    }

    func publishConflicts(_ conflicts: [ConflictNotification]) {
        for conflict in conflicts {
            logger.info("change set rejected", metadata: ["seq": "\(conflict.seq ?? 0)", "code": "\(conflict.reason.code.rawValue)"])
            conflictBroadcaster.publish(conflict)
        }
    }

    /// Runs `operation`, retrying transient transport failures with backoff.
    func retrying(_ report: inout SyncReport, _ operation: () async throws -> Void) async throws {
        var attempt = 0
        while true {
            do {
                return try await operation()
            } catch let error as SyncTransportError where error.isRetryable {
                attempt += 1
                if let maxAttempts = configuration.retry.maxAttempts, attempt >= maxAttempts { throw error }
                report.retries += 1
                try await configuration.sleep(error.retryAfter ?? configuration.retry.delay(forAttempt: attempt, jitter: configuration.random()))
            }
        }
    }

    /// Whether the local records must be (re)loaded from a snapshot before syncing:
    /// never loaded, or a resync the server asked for is not done yet.
    func needsSnapshot() async throws -> Bool {
        let meta = try await database.writer.read { db in try SQLiteRecordStore.readMeta(db) }
        return !meta.bootstrapped || meta.needsResync
    }

    func pendingSeqs() async throws -> [Int64] {
        try await database.writer.read { db in try Int64.fetchAll(db, sql: "SELECT seq FROM revsync_outbox ORDER BY seq") }
    }

    func renumberOutbox(from expected: Int64) async throws -> Bool {
        let layout = try requireLayout()
        return try await database.writer.write { db in
            try OutboxRenumbering.renumber(SQLiteRecordStore(db, layout: layout), from: expected)
        }
    }

    // MARK: One at a time

    func acquireSyncSlot() async {
        guard syncing else {
            syncing = true
            return
        }
        // A long-poll holds the slot only until someone else wants it.
        interruptLongPoll()
        await withCheckedContinuation { syncWaiters.append($0) }
    }

    func releaseSyncSlot() {
        if syncWaiters.isEmpty {
            syncing = false
        } else {
            // The slot passes straight to the next waiter.
            syncWaiters.removeFirst().resume()
        }
    }

    // MARK: Waiting for work

    func wake() {
        interruptLongPoll()
        if wakeWaiters.isEmpty {
            wakePending = true
        } else {
            for waiter in wakeWaiters { waiter.resume() }
            wakeWaiters = []
        }
    }

    /// Returns after a local change, `timeout`, `close()` or cancellation.
    func waitForWork(timeout: Duration) async {
        if wakePending || closed {
            wakePending = false
            return
        }
        let sleep = configuration.sleep
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                try? await sleep(timeout)
                await self.wake()
            }
            await withCheckedContinuation { wakeWaiters.append($0) }
            group.cancelAll()
        }
        wakePending = false
    }
}
