import RevsyncRules
import RevsyncWire

/// What applying one sync response did.
public struct SyncOutcome: Sendable, Hashable {
    /// `seq`s of local change sets the server committed (removed from the outbox).
    public var acknowledged: [Int64] = []
    /// Rejected local change sets, in the response's order.
    public var conflicts: [ConflictNotification] = []
    public var idMappings: [IdMapping] = []
    public var changes = RecordChanges()
    /// Committed change sets received (acknowledgements included).
    public var committedChangeSets = 0
    /// The device's revision after the response.
    public var maxRevision: Int64 = 0
    /// The server has more catch-up: call again.
    public var more = false
    /// A corrective set said `"resync": true`: the records are not repaired until a
    /// snapshot is loaded (`DeviceMeta.needsResync` is set in the same transaction).
    public var needsResync = false

    public init() {}
}

/// Applies a `/sync` response to a store: the pure heart of the device engine.
///
/// In order: every committed change set (acknowledgements of this device's own
/// ones map temporary ids and leave the outbox; catch-up writes the server's
/// values unless the store already holds a newer revision of the record), then
/// each corrective set (the server's truth replaces, re-creates or drops
/// records; the rejected change set leaves the outbox and is reported), then the
/// new `maxRevision`, then the pending change sets are replayed on top.
///
/// Only the change sets the request carried (`sent`) can be acknowledged. An own
/// change set the answer's catch-up brings under the `seq` of a pending change set
/// the request did not carry was judged without it: on a file restored from a
/// backup, before the engine has learnt the server's counters, a new edit can take
/// a `seq` the server has already committed as other content. Such a pending change
/// set stays in the outbox and keeps its temporary ids; the server's change set is
/// still applied as committed (the pending one is replayed on top), and sending
/// the pending one settles it: a retry is acknowledged again, an impostor is
/// refused as `seq_reused` and renumbered.
///
/// A corrective set with `"resync": true` carries no records (the repair was too
/// large to send): the rejected change set still leaves the outbox and is
/// reported, and the store is marked as needing a snapshot, which the caller
/// loads next (`SnapshotLoader`) to repair the records.
public struct ResponseApplier: Sendable {
    public let schema: LocalSchema

    public init(schema: LocalSchema) {
        self.schema = schema
    }

    /// - Parameter sent: the `seq`s of the change sets the request carried (none for a
    ///   long-poll or a catch-up without change sets).
    public func apply(_ response: SyncResponse, to store: any RecordStore, sent: Set<Int64>) throws -> SyncOutcome {
        var session = try Session(schema: schema, store: store, sent: sent)
        for changeSet in response.changeSets {
            if changeSet.conflict == true {
                try session.applyCorrective(changeSet)
            } else {
                try session.applyCommitted(changeSet)
            }
        }
        return try session.finish(maxRevision: response.maxRevision, more: response.more ?? false, history: response.history)
    }

    /// An answer of another history than the request named (the database went back while the
    /// request waited, or between the check and the answer): it must not be applied; the device
    /// loads a new snapshot, as after `409 history_changed`.
    public static func checkHistory(of response: SyncResponse, to request: SyncRequest) throws(SyncTransportError) {
        guard let sent = request.history, let answered = response.history, sent != answered else { return }
        throw .historyChanged(message: "the answer is of another history (\(answered)) than the device's (\(sent)): the database went back")
    }
}

extension ResponseApplier {
    /// The state of one response's application.
    struct Session {
        let schema: LocalSchema
        let store: any RecordStore
        var editor: StoreEditor
        var meta: DeviceMeta
        /// Everything up to here is already in the store (an earlier response or a snapshot).
        let seenUpTo: Int64
        var outbox: [ChangeSet]
        /// The seqs the request carried: the only ones its answer can acknowledge.
        let sent: Set<Int64>
        var rewrittenSeqs: Set<Int64> = []
        var removedSeqs: Set<Int64> = []
        var outcome = SyncOutcome()

        init(schema: LocalSchema, store: any RecordStore, sent: Set<Int64>) throws {
            self.schema = schema
            self.store = store
            self.sent = sent
            self.editor = StoreEditor(store: store, schema: schema)
            self.meta = try store.meta()
            self.seenUpTo = meta.maxRevision
            self.outbox = try store.outbox()
        }

        mutating func applyCommitted(_ changeSet: ChangeSet) throws {
            outcome.committedChangeSets += 1
            // A pending change set this request did not carry shares the seq: not judged here (see the type's notes).
            let unjudged = changeSet.seq.map { seq in !sent.contains(seq) && outbox.contains { $0.seq == seq } } ?? false
            noteOwnSeq(changeSet.seq)
            try adoptMappings(from: changeSet, adopt: !unjudged)
            let revision = changeSet.revision ?? 0
            // An acknowledgement repeated after a re-bootstrap, or a duplicate: the
            // store already reflects it (and possibly later writes); only its id
            // mappings and its outbox entry matter.
            if changeSet.revision == nil || revision > seenUpTo {
                for entity in changeSet.types where schema.entityIfKnown(entity) != nil {
                    guard let changes = changeSet.entities[entity] else { continue }
                    for id in changes.create { try writeCommitted(entity, id, changes.attributes[id] ?? [:], revision, complete: true) }
                    for id in changes.update { try writeCommitted(entity, id, changes.attributes[id] ?? [:], revision, complete: false) }
                    // The server lists cascaded deletes and set-null updates itself.
                    for id in changes.delete { try editor.remove(entity, id: id) }
                }
            }
            if !unjudged, let seq = changeSet.seq, removeFromOutbox(seq) != nil {
                outcome.acknowledged.append(seq)
            }
        }

        mutating func applyCorrective(_ changeSet: ChangeSet) throws {
            let rejected = changeSet.seq.flatMap { removeFromOutbox($0) }
            let reason = changeSet.reason
                ?? ConflictReason(code: .invalid, entity: nil, id: nil, message: "the server rejected the change set without a reason")
            if changeSet.resync == true {
                // Nothing to repair with: the snapshot replaces every record, the rejected
                // set's local effects included, and the outbox (without it) is replayed on top.
                meta.needsResync = true
                outcome.needsResync = true
                outcome.conflicts.append(
                    ConflictNotification(seq: changeSet.seq, reason: reason, rejected: rejected, restored: [:], dropped: [:], resync: true))
                return
            }
            try adoptMappings(from: changeSet, adopt: true)
            var restored: [String: [DeviceRecord]] = [:]
            var dropped: [String: [Int64]] = [:]
            for entity in changeSet.types where schema.entityIfKnown(entity) != nil {
                guard let changes = changeSet.entities[entity] else { continue }
                // Complete current records: the truth, whatever the local revision.
                for id in changes.create + changes.update {
                    let values = changes.attributes[id] ?? [:]
                    let record = DeviceRecord(
                        id: id, revision: values[ReservedAttribute.revision]?.integerValue ?? 0,
                        attributes: schema.completeAttributes(values, of: entity))
                    try editor.put(entity, record)
                    restored[entity, default: []].append(record)
                }
                for id in changes.delete {
                    try editor.remove(entity, id: id)
                    dropped[entity, default: []].append(id)
                }
            }
            // Records the rejected set created exist nowhere else, even if the corrective set omits them.
            for entity in rejected?.types ?? [] where schema.entityIfKnown(entity) != nil {
                for id in rejected?.entities[entity]?.create ?? [] where try store.temporaryIdMapping(id) == nil {
                    if try editor.remove(entity, id: id), !(dropped[entity] ?? []).contains(id) {
                        dropped[entity, default: []].append(id)
                    }
                }
            }
            outcome.conflicts.append(
                ConflictNotification(seq: changeSet.seq, reason: reason, rejected: rejected, restored: restored, dropped: dropped))
        }

        /// Writes a committed record unless the store holds a newer revision of it.
        private mutating func writeCommitted(_ entity: String, _ id: Int64, _ values: Attributes, _ changeSetRevision: Int64, complete: Bool) throws {
            let revision = values[ReservedAttribute.revision]?.integerValue ?? changeSetRevision
            let existing = try store.record(entity, id: id)
            if let existing, existing.revision > revision { return }
            if complete {
                let attributes = schema.completeAttributes(values, of: entity, over: existing?.attributes ?? [:])
                try editor.put(entity, DeviceRecord(id: id, revision: revision, attributes: attributes))
            } else {
                // An update of a record the device does not have: it is pending a local
                // delete (the server will answer that change set) or was never seen.
                guard var record = existing else { return }
                record.attributes.merge(schema.storedAttributes(values, of: entity)) { _, new in new }
                record.revision = revision
                try editor.put(entity, record)
            }
        }

        /// Records `__oldId__` mappings: the temporary record goes, references to it
        /// (stored and pending) now point at the permanent id. A rebuilt acknowledgement lists
        /// a record deleted since under `delete`, with its `__oldId__` only: its temporary copy
        /// goes too. Without `adopt` (a change set
        /// whose seq a pending one shares unjudged), only the counter moves past the ids:
        /// the local records under them may be other records than the server's.
        private mutating func adoptMappings(from changeSet: ChangeSet, adopt: Bool) throws {
            var found: [Int64: TemporaryIdMapping] = [:]
            for entity in changeSet.types {
                guard let changes = changeSet.entities[entity] else { continue }
                for id in changes.create + changes.update + changes.delete {
                    guard let old = changes.attributes[id]?[ReservedAttribute.oldId]?.integerValue, old < 0, id > 0 else { continue }
                    found[old] = TemporaryIdMapping(entity: entity, id: id)
                }
            }
            guard !found.isEmpty else { return }
            if let lowest = found.keys.min(), lowest <= meta.nextTemporaryId {
                // A temporary id this file never handed out: see noteOwnSeq.
                meta.nextTemporaryId = lowest - 1
            }
            guard adopt else { return }
            for (temporaryId, mapping) in found.sorted(by: { $0.key > $1.key }) {
                if try store.temporaryIdMapping(temporaryId) != mapping {
                    try store.setTemporaryIdMapping(temporaryId, to: mapping)
                }
                if schema.entityIfKnown(mapping.entity) != nil {
                    try editor.remove(mapping.entity, id: temporaryId)
                    try editor.replaceReferences(to: mapping.entity, from: temporaryId, to: mapping.id)
                }
                outcome.idMappings.append(IdMapping(entity: mapping.entity, temporaryId: temporaryId, permanentId: mapping.id))
            }
            for index in outbox.indices {
                let rewritten = IdRewriter.rewrite(outbox[index], schema: schema) { entity, id in
                    found[id].flatMap { $0.entity == entity ? $0.id : nil }
                }
                if rewritten != outbox[index], let seq = rewritten.seq {
                    outbox[index] = rewritten
                    rewrittenSeqs.insert(seq)
                }
            }
        }

        /// An own change set with a `seq` this file never handed out: the file is older
        /// than the server's view of the device (restored from a backup). The counters
        /// move past it so that new edits do not reuse it; the engine also learns this
        /// from `GET /devices/me`, and this covers a device that could not ask.
        private mutating func noteOwnSeq(_ seq: Int64?) {
            if let seq, seq >= meta.nextSeq { meta.nextSeq = seq + 1 }
        }

        private mutating func removeFromOutbox(_ seq: Int64) -> ChangeSet? {
            guard let index = outbox.firstIndex(where: { $0.seq == seq }) else { return nil }
            removedSeqs.insert(seq)
            return outbox.remove(at: index)
        }

        /// - Parameter history: the answer's history id; a device that had none learns it.
        mutating func finish(maxRevision: Int64, more: Bool, history: String? = nil) throws -> SyncOutcome {
            if let history { meta.history = history }
            for seq in removedSeqs { try store.removeFromOutbox(seq: seq) }
            for changeSet in outbox where changeSet.seq.map(rewrittenSeqs.contains) == true {
                try store.replaceInOutbox(changeSet)
            }
            meta.maxRevision = max(meta.maxRevision, maxRevision)
            try store.setMeta(meta)
            try OutboxReplayer.replay(outbox, editor: &editor, committedThrough: meta.committedThrough)
            outcome.maxRevision = meta.maxRevision
            outcome.more = more
            outcome.changes = editor.changes
            return outcome
        }
    }
}
