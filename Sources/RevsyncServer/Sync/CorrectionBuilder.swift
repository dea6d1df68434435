import RevsyncRules
import RevsyncWire

/// Builds corrective sets and rebuilt acknowledgements from a `RecordStore`'s snapshot:
/// the rules decide what they hold, this type reads it for them.
struct CorrectionBuilder: Sendable {
    let records: any RecordStore
    let schema: DatasetSchema

    /// The corrective set for a rejected change set, or, when the repair would be larger than
    /// `maxBytes`, the instruction to drop it and re-bootstrap (`CorrectiveSet.resync`). Reading
    /// stops as soon as the limit is passed, so memory stays bounded whatever the cascade.
    func corrective(for changeSet: ChangeSet, reason: ConflictReason, device: Device, maxBytes: Int = .max) async throws -> [UInt8] {
        let schema = self.schema
        return try await records.snapshot { reader in
            let known = try await reader.mappings(Set(CorrectionPlan.temporaryIds(of: changeSet, schema: schema)), device: device)
            var plan = CorrectionPlan(for: changeSet, reason: reason, schema: schema, known: known, maxBytes: maxBytes)
            do {
                var found: [RecordKey: StoredRecord] = [:]
                for (entity, ids) in plan.lookups.sorted(by: { $0.key < $1.key }) {
                    for record in try await reader.records(entity, ids: ids) { found[RecordKey(entity, record.id)] = record }
                }
                try plan.settle(found: found)
                while true {
                    let frontier = plan.takeFrontier()
                    if frontier.isEmpty { break }
                    for (parent, ids) in frontier.sorted(by: { $0.key < $1.key }) {
                        for relation in schema.references(to: parent) {
                            let children = try await reader.records(relation.child, where: relation.attribute, in: ids, limit: plan.room)
                            try plan.addDependents(relation, parentEntity: parent, records: children)
                        }
                    }
                }
                return plan.encoded(schema: schema)
            } catch is CorrectionPlan.TooLarge {
                return plan.resync
            }
        }
    }

    /// The acknowledgement of a seq whose log entry was pruned, rebuilt from what it created.
    func rebuiltAcknowledgement(seq: Int64, revision: Int64, device: Device) async throws -> [UInt8] {
        let schema = self.schema
        return try await records.snapshot { reader in
            let created = try await reader.createdIds(device: device, seq: seq)
            var existing: [RecordKey: StoredRecord] = [:]
            for (entity, items) in Dictionary(grouping: created, by: \.entity) {
                for record in try await reader.records(entity, ids: items.map(\.id)) { existing[RecordKey(entity, record.id)] = record }
            }
            return AcknowledgementEncoder.rebuilt(revision: revision, seq: seq, created: created, records: existing, schema: schema)
        }
    }
}
