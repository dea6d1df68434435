import RevsyncWire

/// One entity's table in a device's SQLite file, and in the snapshot files the
/// server builds for devices to start from: the same SQL on both sides, so that a
/// snapshot file's rows copy into a device's tables as they are.
///
/// `id INTEGER PRIMARY KEY`, `revision`, then one column per attribute (TEXT for
/// strings and timestamps, INTEGER for integers and booleans, REAL for doubles). No
/// NOT NULL or foreign keys: the device's local view may hold references to records
/// that only the server still has to confirm or remove. Reference columns are
/// indexed for cascades and id rewrites.
public struct SnapshotTable: Sendable, Hashable {
    public let name: String
    public let attributes: [AttributeDescription]

    public init(name: String, attributes: [AttributeDescription]) {
        self.name = name
        self.attributes = attributes
    }

    /// `id`, `revision`, then the attributes, in schema order.
    public var columns: [String] { ["id", "revision"] + attributes.map(\.name) }

    public var createSQL: String {
        let columns = ["\"id\" INTEGER PRIMARY KEY NOT NULL", "\"revision\" INTEGER NOT NULL DEFAULT 0"]
            + attributes.map { "\(Self.quote($0.name)) \(Self.columnType($0.type))" }
        return "CREATE TABLE \(Self.quote(name)) (\(columns.joined(separator: ", ")))"
    }

    /// The statement adding `attribute` to an existing table.
    public func addColumnSQL(_ attribute: AttributeDescription) -> String {
        "ALTER TABLE \(Self.quote(name)) ADD COLUMN \(Self.quote(attribute.name)) \(Self.columnType(attribute.type))"
    }

    /// One index per reference attribute.
    public var indexSQL: [String] {
        attributes.filter { $0.references != nil }.map { attribute in
            let index = Self.quote("revsync_\(name)_\(attribute.name)")
            return "CREATE INDEX IF NOT EXISTS \(index) ON \(Self.quote(name)) (\(Self.quote(attribute.name)))"
        }
    }

    /// Inserts one row, every column bound in `columns` order.
    public var insertSQL: String {
        let placeholders = Array(repeating: "?", count: columns.count).joined(separator: ", ")
        return "INSERT INTO \(Self.quote(name)) (\(columns.map(Self.quote).joined(separator: ", "))) VALUES (\(placeholders))"
    }

    /// Names are checked by the schema rules (lowercase letters, digits, `_`), so quoting cannot be escaped.
    public static func quote(_ name: String) -> String { "\"\(name)\"" }

    public static func columnType(_ type: AttributeType) -> String {
        switch type {
        case .string, .timestamp: "TEXT"
        case .integer, .boolean: "INTEGER"
        case .double: "REAL"
        }
    }
}
