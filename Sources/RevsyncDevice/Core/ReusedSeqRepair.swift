import RevsyncWire

/// Answers `409 seq_reused`: the device's file is older than what the server has
/// seen of it (restored from a backup, or an old copy given the token), so its
/// counters are behind and its newer change sets reuse `seq`s, and possibly
/// temporary ids, that the server already handled for other content.
///
/// From `firstReused` (the first pending change set the server refuses, found by
/// `ReusedSeqSearch`) on, every pending change set is renumbered from `expected`
/// in order, and every record those change sets create gets a fresh temporary
/// id below both the server's lowest mapped one and the device's own counter,
/// everywhere it appears: the record itself, references to it in other records,
/// and the pending change sets (creates, updates, deletes, attribute keys,
/// references). The counters move after the new numbers.
///
/// Earlier pending change sets keep their `seq`s and ids: the server handled
/// each of them as the same content, and answers them again with their
/// original outcome. None of them can use an id renamed here, because a record
/// is always created before it is referenced.
///
/// The old temporary ids keep working in reads, edits and references: they are
/// remembered as renamed, per entity, ahead of whatever the server maps them to.
///
/// Callers run it inside one storage transaction, so a crash leaves either the
/// old numbering or the new one.
public enum ReusedSeqRepair {
    /// What the repair changed.
    public struct Result: Sendable, Hashable {
        /// The new `seq` of each renumbered change set, by its old one.
        public var seqs: [Int64: Int64] = [:]
        /// The temporary ids given up, in the order the change sets created them.
        public var renamed: [TemporaryIdRename] = []
        /// Records moved to their new ids, and records whose references changed.
        public var changes = RecordChanges()
    }

    /// - Returns: nil when there is nothing to renumber (no pending change set at
    ///   or after `firstReused`, or `firstReused` is not below `expected`).
    @discardableResult
    public static func repair(
        _ store: any RecordStore, schema: LocalSchema, from firstReused: Int64, expected: Int64, lowestTemporaryId: Int64
    ) throws -> Result? {
        let moving = try store.outbox().filter { ($0.seq ?? 0) >= firstReused }
        guard expected >= 1, firstReused < expected, !moving.isEmpty else { return nil }
        var meta = try store.meta()
        var result = Result()

        // Below the server's lowest (other records) and the device's counter (its own).
        var nextTemporaryId = min(meta.nextTemporaryId, min(lowestTemporaryId, 0) - 1)
        var renames: [Int64: TemporaryIdRename] = [:]
        for changeSet in moving {
            for entity in changeSet.types {
                for id in changeSet.entities[entity]?.create ?? [] where id < 0 && renames[id] == nil {
                    let rename = TemporaryIdRename(entity: entity, from: id, to: nextTemporaryId)
                    nextTemporaryId -= 1
                    renames[id] = rename
                    result.renamed.append(rename)
                }
            }
        }
        func renamed(_ entity: String, _ id: Int64) -> Int64? {
            guard let rename = renames[id], rename.entity == entity else { return nil }
            return rename.to
        }

        // All out first: the new numbers may overlap the old ones.
        for changeSet in moving {
            if let seq = changeSet.seq { try store.removeFromOutbox(seq: seq) }
        }
        var next = expected
        for changeSet in moving {
            var renumbered = IdRewriter.renameTemporaryIds(changeSet, schema: schema, renamed: renamed)
            renumbered.seq = next
            if let seq = changeSet.seq { result.seqs[seq] = next }
            next += 1
            try store.appendToOutbox(renumbered)
        }

        // The new ids lie below every id the device has used, so no record is overwritten.
        var editor = StoreEditor(store: store, schema: schema)
        for rename in result.renamed where schema.entityIfKnown(rename.entity) != nil {
            guard var record = try store.record(rename.entity, id: rename.from) else { continue }
            try editor.remove(rename.entity, id: rename.from)
            record.id = rename.to
            try editor.put(rename.entity, record)
        }
        // After every record moved, so a moved record's own references are found too.
        for rename in result.renamed where schema.entityIfKnown(rename.entity) != nil {
            try editor.replaceReferences(to: rename.entity, from: rename.from, to: rename.to)
        }
        // The app may hold the old ids: they keep finding these records (RecordStore.currentId).
        for rename in result.renamed {
            try store.setRenamedTemporaryId(rename.entity, from: rename.from, to: rename.to)
        }
        result.changes = editor.changes

        meta.nextSeq = next
        meta.nextTemporaryId = nextTemporaryId
        try store.setMeta(meta)
        return result
    }
}
