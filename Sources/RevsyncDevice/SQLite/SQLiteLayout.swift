import RevsyncSnapshotFile
import RevsyncWire

/// The SQL of the entity tables for one schema, built once. The tables themselves
/// are `SnapshotTable`'s, shared with the snapshot files the server builds.
struct SQLiteLayout: Sendable {
    struct Table: Sendable {
        let name: String
        let attributes: [AttributeDescription]
        let selectById: String
        let selectAll: String
        let upsert: String
        let deleteById: String
    }

    let schema: LocalSchema
    let tables: [String: Table]

    init(schema: LocalSchema) {
        self.schema = schema
        var tables: [String: Table] = [:]
        for entity in schema.entities {
            let quoted = Self.quote(entity.name)
            let columns = (["id", "revision"] + entity.attributes.map(\.name)).map(Self.quote).joined(separator: ", ")
            let placeholders = Array(repeating: "?", count: entity.attributes.count + 2).joined(separator: ", ")
            tables[entity.name] = Table(
                name: entity.name,
                attributes: entity.attributes,
                selectById: "SELECT \(columns) FROM \(quoted) WHERE \"id\" = ?",
                selectAll: "SELECT \(columns) FROM \(quoted)",
                upsert: "INSERT OR REPLACE INTO \(quoted) (\(columns)) VALUES (\(placeholders))",
                deleteById: "DELETE FROM \(quoted) WHERE \"id\" = ?")
        }
        self.tables = tables
    }

    func table(_ entity: String) throws(DeviceError) -> Table {
        guard let table = tables[entity] else { throw .unknownEntity(entity) }
        return table
    }

    static func quote(_ name: String) -> String { SnapshotTable.quote(name) }

    /// The entity tables as `SnapshotTable` describes them (the same SQL as a snapshot file's).
    var snapshotTables: [SnapshotTable] {
        schema.entities.map { SnapshotTable(name: $0.name, attributes: $0.attributes) }
    }
}
