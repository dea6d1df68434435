import PostgresNIO
import RevsyncRules
import RevsyncWire

/// How one entity's records are selected and decoded into contract values.
// `package`: the simulator's verdict reads PostgreSQL's records exactly as the snapshot does.
package struct RecordColumns: Sendable {
    package let entity: Entity
    /// `id, revision, "a", ("ts" AT TIME ZONE 'UTC')::text, …` for `FROM "entity" AS t`.
    package let selectList: String
    package let table: String

    package init(_ entity: Entity) {
        self.entity = entity
        self.table = SQLIdentifier.quoted(entity.name)
        let columns = entity.attributes.map { attribute -> String in
            let column = "t." + SQLIdentifier.quoted(attribute.name)
            // Read timestamps as UTC text: exact to the microsecond, unlike a Double-based Date.
            return attribute.type == .timestamp ? "(\(column) AT TIME ZONE 'UTC')::text" : column
        }
        self.selectList = (["t.id", "t.revision"] + columns).joined(separator: ", ")
    }

    package func decode(_ row: PostgresRow) throws -> StoredRecord {
        let cells = row.makeRandomAccess()
        let id = try cells[0].decode(Int64.self)
        let revision = try cells[1].decode(Int64.self)
        var values: Attributes = [:]
        for (offset, attribute) in entity.attributes.enumerated() {
            let cell = cells[offset + 2]
            switch attribute.type {
            case .string:
                values[attribute.name] = try cell.decode(String?.self).map(JSONValue.string) ?? .null
            case .integer:
                values[attribute.name] = try cell.decode(Int64?.self).map(JSONValue.integer) ?? .null
            case .double:
                values[attribute.name] = try cell.decode(Double?.self).map(JSONValue.double) ?? .null
            case .boolean:
                values[attribute.name] = try cell.decode(Bool?.self).map(JSONValue.bool) ?? .null
            case .timestamp:
                let text = try cell.decode(String?.self)
                values[attribute.name] = text.map { .string(Timestamp.canonical($0 + "+00") ?? $0) } ?? .null
            }
        }
        return StoredRecord(id: id, revision: revision, values: values)
    }
}
