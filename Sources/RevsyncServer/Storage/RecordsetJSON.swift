import RevsyncRules
import RevsyncWire

/// Rows as a JSON array for `jsonb_to_recordset`: one bind parameter carries any
/// number of records with any attribute types, nulls included.
struct RecordsetJSON {
    let entity: Entity
    let names: [String]

    init(_ entity: Entity, names: [String]) {
        self.entity = entity
        self.names = names
    }

    /// `id bigint, "a" text, …`
    var columnDefinitions: String {
        (["id bigint"] + names.map { name in
            let type = entity.attribute(named: name).map { SchemaMigrationPlanner.sqlType($0.type) } ?? "text"
            return "\(SQLIdentifier.quoted(name)) \(type)"
        }).joined(separator: ", ")
    }

    func json(_ records: [(Int64, Attributes)]) -> String {
        var out = JSONWriter(capacity: 128 * records.count)
        out.byte(UInt8(ascii: "["))
        for (index, (id, values)) in records.enumerated() {
            if index > 0 { out.byte(UInt8(ascii: ",")) }
            out.raw("{\"id\":")
            out.integer(id)
            for name in names {
                out.byte(UInt8(ascii: ","))
                out.key(name)
                out.value(values[name] ?? .null)
            }
            out.byte(UInt8(ascii: "}"))
        }
        out.byte(UInt8(ascii: "]"))
        return String(decoding: out.bytes, as: UTF8.self)
    }
}
