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
        let (id, revision, ordered) = try values(of: row)
        var values: Attributes = [:]
        values.reserveCapacity(ordered.count)
        for (attribute, value) in zip(entity.attributes, ordered) { values[attribute.name] = value }
        return StoredRecord(id: id, revision: revision, values: values)
    }

    /// The row's id, revision and attribute values in the entity's attribute order: what a
    /// snapshot file stores, without a dictionary between.
    package func values(of row: PostgresRow) throws -> (id: Int64, revision: Int64, values: [JSONValue]) {
        let cells = row.makeRandomAccess()
        let id = try cells[0].decode(Int64.self)
        let revision = try cells[1].decode(Int64.self)
        var values: [JSONValue] = []
        values.reserveCapacity(entity.attributes.count)
        for (offset, attribute) in entity.attributes.enumerated() {
            let cell = cells[offset + 2]
            switch attribute.type {
            case .string:
                values.append(try cell.decode(String?.self).map(JSONValue.string) ?? .null)
            case .integer:
                values.append(try cell.decode(Int64?.self).map(JSONValue.integer) ?? .null)
            case .double:
                values.append(try cell.decode(Double?.self).map(JSONValue.double) ?? .null)
            case .boolean:
                values.append(try cell.decode(Bool?.self).map(JSONValue.bool) ?? .null)
            case .timestamp:
                let text = try cell.decode(String?.self)
                values.append(text.map { .string(Timestamp.canonical(postgresUTC: $0)) } ?? .null)
            }
        }
        return (id, revision, values)
    }
}
