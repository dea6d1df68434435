import RevsyncWire

/// The acknowledgement of a change set whose log entry was pruned, rebuilt from what it
/// created: the records as they are now, each with its `__oldId__`; those deleted since are
/// under `delete` (with `__oldId__`, so the device can drop its temporary copy).
public enum AcknowledgementEncoder {
    /// - Parameters:
    ///   - created: what the change set's temporary ids became, in the order to report them.
    ///   - records: the created records that still exist.
    public static func rebuilt(
        revision: Int64, seq: Int64, created: [CreatedId], records: [RecordKey: StoredRecord], schema: DatasetSchema
    ) -> [UInt8] {
        var types: [String] = []
        var byEntity: [String: [CreatedId]] = [:]
        for item in created {
            if byEntity[item.entity] == nil { types.append(item.entity) }
            byEntity[item.entity, default: []].append(item)
        }
        var out = JSONWriter(capacity: 512)
        out.raw("{\"conflict\":false,\"revision\":")
        out.integer(revision)
        out.raw(",\"seq\":")
        out.integer(seq)
        out.raw(",\"types\":")
        out.stringArray(types)
        for entity in types {
            let pairs = byEntity[entity] ?? []
            let order = schema.entity(named: entity)?.attributes.map(\.name) ?? []
            func existing(_ item: CreatedId) -> StoredRecord? { records[RecordKey(entity, item.id)] }
            out.byte(UInt8(ascii: ","))
            out.key(entity)
            out.raw("{\"create\":")
            out.integerArray(pairs.filter { existing($0) != nil }.map(\.id))
            out.raw(",\"update\":[],\"delete\":")
            out.integerArray(pairs.filter { existing($0) == nil }.map(\.id))
            out.raw(",\"attributes\":{")
            for (index, pair) in pairs.enumerated() {
                if index > 0 { out.byte(UInt8(ascii: ",")) }
                if let record = existing(pair) {
                    out.storedRecord(record, oldId: pair.temporaryId, order: order)
                } else {
                    // Deleted since: only the old id, so the device can drop its temporary copy.
                    out.byte(UInt8(ascii: "\""))
                    out.integer(pair.id)
                    out.raw("\":{\"__oldId__\":")
                    out.integer(pair.temporaryId)
                    out.byte(UInt8(ascii: "}"))
                }
            }
            out.raw("}}")
        }
        out.byte(UInt8(ascii: "}"))
        return out.bytes
    }
}
