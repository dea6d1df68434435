import RevsyncWire

/// Re-applies pending local change sets on top of the records, so that local
/// edits stay visible over data the server just sent ("rebase").
///
/// Replaying a pending change set over records that already include it changes
/// nothing, so the rules replay everything after writing server data instead of
/// tracking which pending edit touched which record. Within a change set the
/// order is the server's: creates, then updates, then deletes.
///
/// Except over a snapshot that holds a change set still pending (committed, its answer
/// lost) *and later writes over it*: replayed, it would undo those. The snapshot says which
/// seqs it holds (`committedThrough`); those are not replayed.
enum OutboxReplayer {
    static func replay(_ outbox: [ChangeSet], editor: inout StoreEditor, committedThrough: Int64 = 0) throws {
        let schema = editor.schema
        let store = editor.store
        for changeSet in outbox where (changeSet.seq ?? .max) > committedThrough {
            let entities = changeSet.types.filter { schema.entityIfKnown($0) != nil }
            for entity in entities {
                guard let changes = changeSet.entities[entity] else { continue }
                for id in changes.create {
                    // Mapped: the server has it (the acknowledgement has not arrived or been applied yet).
                    guard try store.temporaryIdMapping(id) == nil else { continue }
                    let values = schema.completeAttributes(changes.attributes[id] ?? [:], of: entity)
                    try editor.put(entity, DeviceRecord(id: id, revision: 0, attributes: values))
                }
            }
            for entity in entities {
                guard let changes = changeSet.entities[entity] else { continue }
                for id in changes.update {
                    let current = try store.currentId(of: entity, id)
                    // Gone (deleted by the server or by an earlier pending delete): the server will say.
                    guard var record = try store.record(entity, id: current) else { continue }
                    let values = schema.storedAttributes(changes.attributes[id] ?? [:], of: entity)
                    record.attributes.merge(values) { _, new in new }
                    try editor.put(entity, record)
                }
            }
            for entity in entities {
                guard let changes = changeSet.entities[entity] else { continue }
                for id in changes.delete {
                    try editor.delete(entity, id: try store.currentId(of: entity, id))
                }
            }
        }
    }
}
