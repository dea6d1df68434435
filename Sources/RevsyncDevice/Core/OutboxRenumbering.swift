import RevsyncWire

/// Answers `409 sequence_gap`: the server expects a lower `seq` than the oldest
/// pending one, so it has never seen any pending change set (its per-device state
/// was reset, or restored from a backup). Renumbering them from `expected` keeps
/// their order; no `seq` it has handled is reused.
public enum OutboxRenumbering {
    /// - Returns: whether anything changed (false when the gap cannot be closed this way).
    @discardableResult
    public static func renumber(_ store: any RecordStore, from expected: Int64) throws -> Bool {
        let pending = try store.outbox()
        guard let first = pending.first?.seq, expected >= 1, expected < first else { return false }
        for changeSet in pending {
            if let seq = changeSet.seq { try store.removeFromOutbox(seq: seq) }
        }
        var next = expected
        for var changeSet in pending {
            changeSet.seq = next
            next += 1
            try store.appendToOutbox(changeSet)
        }
        var meta = try store.meta()
        meta.nextSeq = next
        // The server has none of them: none is in the records (a snapshot's `lastSeq` was of
        // what the server has forgotten since).
        meta.committedThrough = min(meta.committedThrough, expected - 1)
        try store.setMeta(meta)
        return true
    }
}
