import RevsyncWire

/// A pending change set the server refuses as too large (`413 too_large`) even when it is
/// sent alone: no request can ever carry it, and every change set after it would wait behind
/// it for good. It leaves the outbox as one the server rejected with `"resync": true` does
/// (`ResponseApplier`): a notification that carries it, and the records reloaded from a
/// snapshot, which undoes its local edits while the later pending change sets are replayed
/// on top.
public enum UndeliverableChangeSet {
    /// Removes change set `seq` from the outbox, gives the ones after it the seqs from `seq` on
    /// (the server refused the request before reading any seq, and would answer the hole
    /// `sequence_gap`), and marks the records for a snapshot. One transaction of the caller's.
    /// - Parameter serverHandledThrough: the last seq the server is known to have handled. A
    ///   change set at or below it (or `committedThrough`) was handled before the server's
    ///   limits were lowered, and the later ones keep their seqs: renumbered over handled seqs,
    ///   a retry would look like another change set. Nil (not known): none is renumbered, and
    ///   the server's `sequence_gap` says where to.
    /// - Returns: the notification to store, and to deliver once the snapshot is loaded; nil
    ///   when `seq` is no longer pending.
    public static func drop(
        seq: Int64, from store: any RecordStore, serverMessage: String, serverHandledThrough: Int64?
    ) throws -> ConflictNotification? {
        let outbox = try store.outbox()
        guard let changeSet = outbox.first(where: { $0.seq == seq }) else { return nil }
        try store.removeFromOutbox(seq: seq)
        var meta = try store.meta()
        if let handled = serverHandledThrough, seq > max(handled, meta.committedThrough) {
            try OutboxRenumbering.renumber(store, from: seq)
            meta = try store.meta()
            // `renumber` leaves the counters alone when nothing came after the dropped one;
            // the ones after it now run from `seq` on, one each.
            let after = outbox.filter { ($0.seq ?? 0) > seq }.count
            meta.nextSeq = seq + Int64(after)
        }
        meta.needsResync = true
        try store.setMeta(meta)
        let reason = ConflictReason(
            code: .invalid, entity: nil, id: nil,
            message: "the server refuses this change set as too large even on its own (413: \(serverMessage)); "
                + "it was dropped and the records reloaded: keep SyncEngineConfiguration.maxChangeSetBytes "
                + "and maxOperationsPerChangeSet at most the server's request limits")
        return ConflictNotification(seq: seq, reason: reason, rejected: changeSet, restored: [:], dropped: [:], resync: true)
    }
}
