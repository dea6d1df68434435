import RevsyncRules
import RevsyncWire

/// Builds the body of `POST /sync` from a store.
public enum RequestBuilder {
    /// The device's `maxRevision` and its oldest pending change sets (at most
    /// `limit`, and at most `maxOperations` creates, updates and deletes in all,
    /// though always at least one change set), in `seq` order, with mapped
    /// temporary ids rewritten to permanent ones.
    public static func build(from store: any RecordStore, schema: LocalSchema, limit: Int? = nil, maxOperations: Int? = nil) throws -> SyncRequest {
        var pending = try store.outbox()
        if let limit { pending = Array(pending.prefix(max(1, limit))) }
        if let maxOperations { pending = Array(pending.prefix(countFitting(pending, maxOperations: maxOperations))) }
        let meta = try store.meta()
        return SyncRequest(maxRevision: meta.maxRevision, changeSets: try rewritten(pending, store: store, schema: schema), history: meta.history)
    }

    /// How many of the first change sets hold at most `maxOperations` operations in
    /// all: at least one, so that a change set over the limit is still sent (alone).
    static func countFitting(_ changeSets: [ChangeSet], maxOperations: Int) -> Int {
        var total = 0
        for (index, changeSet) in changeSets.enumerated() {
            total += changeSet.operationCount
            if total > maxOperations { return max(1, index) }
        }
        return changeSets.count
    }

    /// A probe of `ReusedSeqSearch`: the pending change sets whose seqs lie in
    /// `seqs`, as they would be sent, with `maxRevision` in place of the device's.
    /// The answer is thrown away, so a revision the device has not applied (the
    /// server's head from an earlier answer) only spares the server a long catch-up.
    public static func probe(from store: any RecordStore, schema: LocalSchema, seqs: ClosedRange<Int64>, maxRevision: Int64) throws -> SyncRequest {
        let pending = try store.outbox().filter { $0.seq.map(seqs.contains) == true }
        return SyncRequest(maxRevision: maxRevision, changeSets: try rewritten(pending, store: store, schema: schema), history: try store.meta().history)
    }

    private static func rewritten(_ pending: [ChangeSet], store: any RecordStore, schema: LocalSchema) throws -> [ChangeSet] {
        var map: [Int64: TemporaryIdMapping] = [:]
        for changeSet in pending {
            for id in IdRewriter.temporaryIdsToResolve(in: changeSet, schema: schema) where map[id] == nil {
                if let mapping = try store.temporaryIdMapping(id) { map[id] = mapping }
            }
        }
        guard !map.isEmpty else { return pending }
        return pending.map { changeSet in
            IdRewriter.rewrite(changeSet, schema: schema) { entity, id in
                map[id].flatMap { $0.entity == entity ? $0.id : nil }
            }
        }
    }
}
