import RevsyncWire

/// Answers `409 sequence_gap`: a pending change set's `seq` skips past the one the server
/// expects, so the server has never seen it or any after it (its per-device state was
/// reset, or restored from a backup). Those from `expected` on are renumbered `expected`,
/// `expected + 1`, … in order; no `seq` the server has handled is reused.
///
/// Pending change sets below `expected` keep their `seq`s: the request carried them
/// before the gap, and `expected` counts them (the server takes them next, or answers
/// them again as retries). An outbox can hold such a run followed by holes: a page of an
/// answer that ended before its own acknowledgements (the catch-up limit) still carries
/// the corrective sets of the request's rejected change sets, which leave the outbox,
/// while the acknowledged ones wait for the next page; a database restored meanwhile
/// forgets them all, and only the ones after the first hole need new numbers.
public enum OutboxRenumbering {
    /// - Returns: whether anything changed (false when the gap cannot be closed this way:
    ///   nothing pending at or above `expected`, or those already follow on from it).
    @discardableResult
    public static func renumber(_ store: any RecordStore, from expected: Int64) throws -> Bool {
        guard expected >= 1 else { return false }
        let moving = try store.outbox().filter { ($0.seq ?? 0) >= expected }
        let renumbered = moving.indices.map { expected + Int64($0) }
        guard moving.map(\.seq) != renumbered.map(Optional.some) else { return false }
        // All out first: the new numbers may overlap the old ones.
        for changeSet in moving {
            if let seq = changeSet.seq { try store.removeFromOutbox(seq: seq) }
        }
        for (var changeSet, seq) in zip(moving, renumbered) {
            changeSet.seq = seq
            try store.appendToOutbox(changeSet)
        }
        var meta = try store.meta()
        meta.nextSeq = expected + Int64(moving.count)
        // The server has none of the renumbered ones: none is in the records (a snapshot's
        // `lastSeq` was of what the server has forgotten since). A kept one the server no longer
        // has either may stay at or below it (a state reset without a history change, after a
        // snapshot): hidden until its acknowledgement, never lost.
        meta.committedThrough = min(meta.committedThrough, expected - 1)
        try store.setMeta(meta)
        return true
    }
}
