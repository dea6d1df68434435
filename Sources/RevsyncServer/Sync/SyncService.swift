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
    let devices: DeviceStore
    let limits: ServerSettings.Limits
    let metrics: ServerMetrics

    func sync(_ request: SyncRequest, device: Device, logger: Logger) async throws -> ByteBuffer {
        guard request.maxRevision >= 0 else {
            throw SyncError(.invalidRequest, "maxRevision must be 0 or more, not \(request.maxRevision)")
        }
        guard request.changeSets.count <= limits.maxChangeSetsPerRequest else {
            throw SyncError(.tooLarge, "\(request.changeSets.count) change sets in one request; the limit is \(limits.maxChangeSetsPerRequest): send the rest next")
        }
        try await checkSequence(request.changeSets, device: device)
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
        // Acknowledgements the device asks for again although it is past them (after a re-bootstrap).
        // Those whose log entry was pruned are rebuilt from the temporary-id map.
        let old = outcomes.compactMap(\.revision).filter { $0 <= request.maxRevision }
        var oldAcks: [(revision: Int64, bytes: [UInt8])] = try await changeLog.authorEntries(old, for: device).map {
            ($0.revision, Array($0.bytes.readableBytesView))
        }
        for case .repeated(let revision, let seq) in outcomes where old.contains(revision) && !oldAcks.contains(where: { $0.revision == revision }) {
            oldAcks.append((revision, try await corrections.rebuiltAcknowledgement(seq: seq, revision: revision, device: device)))
        }
        oldAcks.sort { $0.revision < $1.revision }
        metrics.recordCatchUp(changeSets: page.entries.count, source: page.source, duration: ContinuousClock.now - started)

        var correctives: [[UInt8]] = []
        for outcome in outcomes {
            switch outcome {
            case .rejected(let reason, let changeSet), .repeatedRejection(let reason, let changeSet):
                correctives.append(try await corrections.corrective(for: changeSet, reason: reason, device: device))
            case .applied, .repeated:
                continue
            }
        }

        let size = page.entries.reduce(0) { $0 + $1.bytes.readableBytes } + (oldAcks.map(\.bytes) + correctives).reduce(0) { $0 + $1.count }
        var writer = SyncResponseWriter(capacity: size + 16 * (outcomes.count + page.entries.count))
        for ack in oldAcks { writer.append(ack.bytes) }
        for entry in page.entries { writer.append(entry.bytes) }
        for corrective in correctives { writer.append(corrective) }
        let maxRevision = page.entries.last?.revision ?? request.maxRevision
        if let last = page.entries.last { metrics.observeHead(last.revision) }
        return writer.finish(maxRevision: maxRevision, more: page.more)
    }

    /// Change sets with a seq must come in increasing order, and the first new one
    /// must be the next the server expects; otherwise nothing of the request applies.
    private func checkSequence(_ changeSets: [ChangeSet], device: Device) async throws {
        let seqs = changeSets.compactMap(\.seq)
        guard !seqs.isEmpty else { return }
        for (previous, next) in zip(seqs, seqs.dropFirst()) where next <= previous {
            throw SyncError(.invalidRequest, "change set seqs must increase within a request: \(next) follows \(previous)")
        }
        guard let first = seqs.first, first >= 1 else {
            throw SyncError(.invalidRequest, "seq starts at 1")
        }
        let last = try await devices.lastSeq(of: device)
        var expected = last + 1
        for seq in seqs where seq > last {
            guard seq == expected else {
                throw SyncError(.sequenceGap, "change set seq \(seq) skips ahead: the next expected seq is \(expected)", expected: expected)
            }
            expected += 1
        }
    }
}
