import GRDB
import Logging
import RevsyncWire

/// What the server has handled for the device: the highest `seq` and the lowest
/// temporary id it has mapped (0 for none).
struct ServerCounters: Sendable, Hashable {
    var lastSeq: Int64
    var lowestTemporaryId: Int64
}

/// A device whose file is older than the server's view of it (restored from a
/// backup, or an app reinstalled and given its old token): its counters are
/// behind, so its new change sets would reuse seqs and temporary ids the server
/// has already handled as other content. See docs/device.md, "Restored devices".
extension SyncEngine {
    /// Asks `GET /devices/me` and moves the counters past the server's, so that
    /// new edits never collide. Pending change sets keep their numbers: the
    /// server says, through `seq_reused`, which of them are not true retries.
    ///
    /// Throws only a 401 (and cancellation). A transient failure leaves the
    /// question for the next round; a server without the endpoint is not asked
    /// again. Either way `seq_reused` still protects the edits.
    func learnServerCounters(token: String) async throws {
        let info: DeviceInfo
        do {
            info = try await transport.device(token: token)
        } catch let error as SyncTransportError {
            if case .unauthorized = error { throw error }
            if error.isRetryable {
                logger.debug("GET /devices/me failed; asking again before the next round", metadata: ["error": "\(error)"])
            } else {
                countersChecked = true
                logger.warning("GET /devices/me is refused; relying on seq_reused", metadata: ["error": "\(error)"])
            }
            return
        }
        try await adoptServerCounters(ServerCounters(lastSeq: info.lastSeq, lowestTemporaryId: info.lowestTemporaryId))
        countersChecked = true
    }

    /// Remembers the server's counters and moves the local ones past them.
    func adoptServerCounters(_ counters: ServerCounters) async throws {
        serverCounters = counters
        let (before, after) = try await database.writer.write { db in
            let meta = try SQLiteRecordStore.readMeta(db)
            let moved = meta.movedPast(lastSeq: counters.lastSeq, lowestTemporaryId: counters.lowestTemporaryId)
            if moved != meta { try SQLiteRecordStore.writeMeta(moved, db) }
            return (meta, moved)
        }
        if before != after {
            logger.warning(
                "the server has seen more of this device than its file holds (restored from a backup?); counters moved past it",
                metadata: [
                    "nextSeq": "\(before.nextSeq) -> \(after.nextSeq)",
                    "nextTemporaryId": "\(before.nextTemporaryId) -> \(after.nextTemporaryId)",
                ])
        }
    }

    /// The pending seqs the server has handled and that are not proven retries.
    func unprovenSuspects(below expected: Int64) async throws -> [Int64] {
        let proven = provenRetriesThrough
        return try await pendingSeqs().filter { $0 > proven && $0 < expected }
    }

    /// A search to run before the next batch, when it would not carry every pending
    /// change set the server may know under another content: its answer would then
    /// acknowledge, by seq, change sets it never judged (see ReusedSeqSearch).
    func searchNeededBeforeSending(limit: Int) async throws -> ReusedSeqSearch? {
        guard let counters = serverCounters, counters.lastSeq > provenRetriesThrough else { return nil }
        let pending = try await pendingSeqs()
        let proven = provenRetriesThrough
        let suspects = pending.filter { $0 > proven && $0 <= counters.lastSeq }
        guard let last = suspects.last, pending.count > limit, last > pending[max(1, limit) - 1] else { return nil }
        logger.info("pending change sets the server has handled exceed one request; checking them first", metadata: ["suspects": "\(suspects.count)"])
        return ReusedSeqSearch(suspects: suspects)
    }

    /// Renumbers the pending change sets from `firstReused` on past the server's
    /// seqs, with new temporary ids for what they create, in one SQLite transaction.
    func repairReusedSeqs(from firstReused: Int64) async throws {
        let layout = try requireLayout()
        guard let counters = serverCounters else { return }
        let result = try await database.writer.write { db in
            try ReusedSeqRepair.repair(
                SQLiteRecordStore(db, layout: layout), schema: layout.schema, from: firstReused, expected: counters.lastSeq + 1,
                lowestTemporaryId: counters.lowestTemporaryId)
        }
        guard let result else { return }
        logger.warning(
            "pending change sets reused seqs the server had handled as other content; renumbered",
            metadata: [
                "from": "\(firstReused)", "to": "\(counters.lastSeq + 1)", "changeSets": "\(result.seqs.count)",
                "renamedTemporaryIds": "\(result.renamed.count)",
            ])
        if !result.changes.isEmpty || !result.renamed.isEmpty {
            changeBroadcaster.publish(ChangeEvent(origin: .sync, records: result.changes, renamedTemporaryIds: result.renamed))
        }
    }
}
