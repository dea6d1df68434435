import RevsyncWire

/// The SQL of the entity tables for one schema, built once.
///
/// One table per entity, named like it: `id INTEGER PRIMARY KEY`, `revision`,
/// then one column per attribute (TEXT for strings and timestamps, INTEGER for
/// integers and booleans, REAL for doubles). No NOT NULL or foreign keys: the
/// local view may hold references to records that only the server still has to
/// confirm or remove. Reference columns are indexed for cascades and id rewrites.
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

    /// Names are checked by `LocalSchema` (lowercase letters, digits, `_`), so quoting cannot be escaped.
    static func quote(_ name: String) -> String { "\"\(name)\"" }

    static func columnType(_ type: AttributeType) -> String {
        switch type {
        case .string, .timestamp: "TEXT"
        case .integer, .boolean: "INTEGER"
        case .double: "REAL"
        }
    }
}
