import RevsyncWire

/// Writes a committed change set as the exact bytes a catch-up response carries.
///
/// The revision is not known until the revision lock is taken at the very end of
/// the transaction, so it is written as `JSONWriter.placeholder` and substituted
/// by the database in the same statement that takes the lock.
public enum LogEntryEncoder {
    /// - Parameter author: the creating device's form, with `seq` and `__oldId__`.
    public static func encode(_ applied: AppliedChangeSet, schema: DatasetSchema, author: Bool) -> [UInt8] {
        var out = JSONWriter(capacity: 512)
        out.raw("{\"conflict\":false,\"revision\":")
        out.revisionPlaceholder()
        if author, let seq = applied.seq {
            out.raw(",\"seq\":")
            out.integer(seq)
        }
        out.raw(",\"types\":")
        out.stringArray(applied.types)
        for entity in applied.types {
            let created = applied.created[entity] ?? []
            let updated = applied.updated[entity] ?? []
            let order = schema.entity(named: entity)?.attributes.map(\.name) ?? []
            out.byte(UInt8(ascii: ","))
            out.key(entity)
            out.raw("{\"create\":")
            out.integerArray(created.map(\.id))
            out.raw(",\"update\":")
            out.integerArray(updated.map(\.id))
            out.raw(",\"delete\":")
            out.integerArray(applied.deleted[entity] ?? [])
            out.raw(",\"attributes\":{")
            var first = true
            for record in created {
                RecordWriter.open(&out, id: record.id, first: &first)
                if author { RecordWriter.field(&out, ReservedAttribute.oldId, .integer(record.temporaryId)) }
                out.raw("\"revision\":")
                out.revisionPlaceholder()
                RecordWriter.values(&out, record.values, order: order, leadingComma: true)
                out.byte(UInt8(ascii: "}"))
            }
            for record in updated {
                RecordWriter.open(&out, id: record.id, first: &first)
                out.raw("\"revision\":")
                out.revisionPlaceholder()
                RecordWriter.values(&out, record.values, order: order, leadingComma: true)
                out.byte(UInt8(ascii: "}"))
            }
            out.raw("}}")
        }
        out.byte(UInt8(ascii: "}"))
        return out.bytes
    }
}

/// Shared pieces of writing records into change set JSON.
enum RecordWriter {
    /// `"id":{` with a separating comma after the first record.
    static func open(_ out: inout JSONWriter, id: Int64, first: inout Bool) {
        if !first { out.byte(UInt8(ascii: ",")) }
        first = false
        out.byte(UInt8(ascii: "\""))
        out.integer(id)
        out.raw("\":{")
    }

    /// `"name":value,` (always followed by more fields).
    static func field(_ out: inout JSONWriter, _ name: String, _ value: JSONValue) {
        out.key(name)
        out.value(value)
        out.byte(UInt8(ascii: ","))
    }

    /// The values in schema order; names outside `order` are skipped.
    static func values(_ out: inout JSONWriter, _ values: Attributes, order: [String], leadingComma: Bool) {
        var needsComma = leadingComma
        for name in order {
            guard let value = values[name] else { continue }
            if needsComma { out.byte(UInt8(ascii: ",")) }
            needsComma = true
            out.key(name)
            out.value(value)
        }
    }
}
