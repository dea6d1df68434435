import RevsyncWire

/// Replaces the local records by a snapshot (`GET /snapshot`), keeping pending changes.
public enum SnapshotLoader {
    /// Loads `snapshot` into `store`: every record is replaced by the snapshot's,
    /// `maxRevision` becomes its revision (and a pending resync is done), and the
    /// outbox is replayed on top.
    /// The outbox, counters and temporary id map are kept, so pending edits
    /// survive a re-bootstrap and are sent afterwards. Pending change sets the snapshot
    /// says the server had handled already (`lastSeq`) are kept but not replayed.
    /// - Returns: the number of records loaded.
    @discardableResult
    public static func load(_ snapshot: SyncResponse, into store: any RecordStore, schema: LocalSchema) throws -> Int {
        try store.removeAllRecords()
        var count = 0
        for changeSet in snapshot.changeSets {
            for entity in changeSet.types where schema.entityIfKnown(entity) != nil {
                guard let changes = changeSet.entities[entity] else { continue }
                for id in changes.create + changes.update {
                    let values = changes.attributes[id] ?? [:]
                    let revision = values[ReservedAttribute.revision]?.integerValue ?? changeSet.revision ?? snapshot.maxRevision
                    try store.put(entity, DeviceRecord(id: id, revision: revision, attributes: schema.completeAttributes(values, of: entity)))
                    count += 1
                }
            }
        }
        try settle(store, at: snapshot.maxRevision, history: snapshot.history, lastSeq: snapshot.lastSeq, schema: schema)
        return count
    }

    /// After a snapshot's records replaced the store's (JSON, or a SQLite file's
    /// tables copied in): `maxRevision` becomes `revision`, the history id the snapshot's
    /// (nil from a server without one), a pending resync is done, and the outbox is replayed on top.
    ///
    /// `lastSeq`: the device's last seq the server had handled when it read the records (or
    /// later). A pending change set through it was committed (or rejected) with its answer lost:
    /// the records hold it, and whatever others wrote over it since. Replayed on top it would
    /// undo their writes, and its acknowledgement (a repeat, at or below the snapshot's revision)
    /// would not redo them: the device would keep its own old values for good. It stays pending,
    /// unreplayed (`DeviceMeta.committedThrough`), until that acknowledgement or corrective set.
    public static func settle(_ store: any RecordStore, at revision: Int64, history: String?, lastSeq: Int64? = nil, schema: LocalSchema) throws {
        var meta = try store.meta()
        meta.maxRevision = revision
        meta.history = history
        meta.bootstrapped = true
        meta.needsResync = false
        meta.committedThrough = lastSeq ?? 0
        if let lastSeq { meta.nextSeq = max(meta.nextSeq, lastSeq + 1) }
        try store.setMeta(meta)
        var editor = StoreEditor(store: store, schema: schema)
        try OutboxReplayer.replay(try store.outbox(), editor: &editor, committedThrough: meta.committedThrough)
    }
}
