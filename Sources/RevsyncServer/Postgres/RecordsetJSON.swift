import RevsyncRules
import RevsyncWire

/// Rows as a JSON array for `jsonb_to_recordset`: one bind parameter carries any
/// number of records with any attribute types, nulls included, and each record's
/// write history (`rs_writer`, `rs_other_revision`).
struct RecordsetJSON {
    let entity: Entity
    let names: [String]
    let stamping: Bool

    init(_ entity: Entity, names: [String], stamping: Bool = false) {
        self.entity = entity
        self.names = names
        self.stamping = stamping
    }

    /// `id bigint, "a" text, …`
    var columnDefinitions: String {
        (["id bigint", "rs_writer bigint", "rs_other_revision bigint"] + (stamping ? ["rs_k bigint"] : []) + names.map { name in
            let type = entity.attribute(named: name).map { SchemaMigrationPlanner.sqlType($0.type) } ?? "text"
            return "\(SQLIdentifier.quoted(name)) \(type)"
        }).joined(separator: ", ")
    }

    /// - Parameter ks: each record's `rs_k`, when `stamping`.
    func json(_ records: [RecordWrite], ks: [Int64] = []) -> String {
        var out = JSONWriter(capacity: 128 * records.count)
        out.byte(UInt8(ascii: "["))
        for (index, record) in records.enumerated() {
            if index > 0 { out.byte(UInt8(ascii: ",")) }
            out.raw("{\"id\":")
            out.integer(record.id)
            out.raw(",\"rs_writer\":")
            out.integer(record.writer)
            out.raw(",\"rs_other_revision\":")
            out.integer(record.otherRevision)
            if stamping, index < ks.count {
                out.raw(",\"rs_k\":")
                out.integer(ks[index])
            }
            for name in names {
                out.byte(UInt8(ascii: ","))
                out.key(name)
                out.value(record.values[name] ?? .null)
            }
            out.byte(UInt8(ascii: "}"))
        }
        out.byte(UInt8(ascii: "]"))
        return String(decoding: out.bytes, as: UTF8.self)
    }
}
