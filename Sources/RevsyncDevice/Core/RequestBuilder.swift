import RevsyncWire

/// Builds the body of `POST /sync` from a store.
public enum RequestBuilder {
    /// The device's `maxRevision` and its oldest pending change sets (at most
    /// `limit`), in `seq` order, with mapped temporary ids rewritten to permanent ones.
    public static func build(from store: any RecordStore, schema: LocalSchema, limit: Int? = nil) throws -> SyncRequest {
        let meta = try store.meta()
        var pending = try store.outbox()
        if let limit { pending = Array(pending.prefix(max(1, limit))) }
        var map: [Int64: TemporaryIdMapping] = [:]
        for changeSet in pending {
            for id in IdRewriter.temporaryIdsToResolve(in: changeSet, schema: schema) where map[id] == nil {
                if let mapping = try store.temporaryIdMapping(id) { map[id] = mapping }
            }
        }
        let changeSets = pending.map { changeSet in
            map.isEmpty
                ? changeSet
                : IdRewriter.rewrite(changeSet, schema: schema) { entity, id in
                    map[id].flatMap { $0.entity == entity ? $0.permanentId : nil }
                }
        }
        return SyncRequest(maxRevision: meta.maxRevision, changeSets: changeSets)
    }
}
