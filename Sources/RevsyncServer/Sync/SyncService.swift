import Logging
import NIOCore
import RevsyncRules
import RevsyncWire

/// One `/sync` exchange: checks the envelope, applies the change sets in order,
/// then answers with the catch-up, acknowledgements and corrective sets.
struct SyncService: Sendable {
    let applier: ChangeSetApplier
    let changeLog: any ChangeLog
    let corrections: CorrectionReader
    let ledger: SeqLedger
    let limits: ServerSettings.Limits
    let metrics: ServerMetrics

    func sync(_ request: SyncRequest, device: Device, logger: Logger) async throws -> ByteBuffer {
        guard request.maxRevision >= 0 else {
            throw SyncError(.invalidRequest, "maxRevision must be 0 or more, not \(request.maxRevision)")
        }
        guard request.changeSets.count <= limits.maxChangeSetsPerRequest else {
            throw SyncError(.tooLarge, "\(request.changeSets.count) change sets in one request; the limit is \(limits.maxChangeSetsPerRequest): send the rest next")
        }
        let operations = request.changeSets.reduce(0) { total, set in
            total + set.entities.values.reduce(0) { $0 + $1.create.count + $1.update.count + $1.delete.count }
        }
        guard operations <= limits.maxOperationsPerRequest else {
            throw SyncError(.tooLarge, "\(operations) operations in one request; the limit is \(limits.maxOperationsPerRequest): send fewer change sets at a time")
        }
        try await ledger.check(request.changeSets, device: device)
        var state = try await changeLog.state()
        // A cached head may lag (or have been set back): ask PostgreSQL before refusing.
        if request.maxRevision > state.head { state = try await changeLog.authoritativeState() }
        guard request.maxRevision <= state.head else {
            throw SyncError(.revisionAhead, "maxRevision \(request.maxRevision) is above the server's head revision \(state.head)")
        }
        guard request.maxRevision >= state.horizon else {
            throw SyncError(.snapshotRequired, "maxRevision \(request.maxRevision) is older than the retained log (from \(state.horizon)): bootstrap from GET /snapshot")
        }

        var outcomes: [ApplyOutcome] = []
        for changeSet in request.changeSets {
            let started = ContinuousClock.now
            let outcome = try await applier.apply(changeSet, device: device)
            metrics.recordApply(outcome, changeSet: changeSet, duration: ContinuousClock.now - started)
            if case .applied(_, _, let entry) = outcome { await changeLog.didCommit(entry) }
            logger.debug("change set handled", metadata: ["seq": "\(changeSet.seq.map(String.init) ?? "-")", "outcome": "\(outcome)"])
            outcomes.append(outcome)
        }

        let started = ContinuousClock.now
        let head = max(state.head, outcomes.compactMap(\.revision).max() ?? 0)
        let page = try await changeLog.entries(
            after: request.maxRevision, through: head, for: device,
            limits: CatchUpLimits(maxChangeSets: limits.catchUpMaxChangeSets, maxBytes: limits.catchUpMaxBytes))
        let oldAcks = try await repeatedAcknowledgements(outcomes, maxRevision: request.maxRevision, device: device)
        metrics.recordCatchUp(changeSets: page.entries.count, source: page.source, duration: ContinuousClock.now - started)
        let correctives = try await correctiveSets(outcomes, device: device)

        let size = page.entries.reduce(0) { $0 + $1.bytes.readableBytes } + (oldAcks + correctives).reduce(0) { $0 + $1.count }
        var writer = SyncResponseWriter(capacity: size + 16 * (outcomes.count + page.entries.count))
        for ack in oldAcks { writer.append(ack) }
        for entry in page.entries { writer.append(entry.bytes) }
        for corrective in correctives { writer.append(corrective) }
        let maxRevision = page.entries.last?.revision ?? request.maxRevision
        if let last = page.entries.last { metrics.observeHead(last.revision) }
        return writer.finish(maxRevision: maxRevision, more: page.more)
    }

    /// Acknowledgements the device asks for again although it is past them (after a
    /// re-bootstrap), oldest first; those whose log entry was pruned are rebuilt.
    private func repeatedAcknowledgements(_ outcomes: [ApplyOutcome], maxRevision: Int64, device: Device) async throws -> [[UInt8]] {
        let old = outcomes.compactMap(\.revision).filter { $0 <= maxRevision }
        guard !old.isEmpty else { return [] }
        var acks: [(revision: Int64, bytes: [UInt8])] = try await changeLog.authorEntries(old, for: device).map {
            ($0.revision, Array($0.bytes.readableBytesView))
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
