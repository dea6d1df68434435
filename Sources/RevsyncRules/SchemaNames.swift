import RevsyncWire

/// The rules for names in a dataset schema: the same where the server loads its
/// schema file and where a device checks the schema it is served.
public enum SchemaNames {
    /// Lowercase ASCII letters, digits and `_`, beginning with a letter, at most 63
    /// bytes: such names are table and column names in PostgreSQL and SQLite alike.
    public static func isIdentifier(_ name: String) -> Bool {
        guard let first = name.utf8.first, (97...122).contains(first), name.utf8.count <= 63 else { return false }
        return name.utf8.allSatisfy { (97...122).contains($0) || (48...57).contains($0) || $0 == UInt8(ascii: "_") }
    }

    /// Entity names a change set's own keys (`seq`, `types`, …) or the server's tables take.
    public static func isReservedEntityName(_ name: String) -> Bool {
        ChangeSet.reservedKeys.contains(name) || name.hasPrefix("revsync_")
    }

    /// Attribute names every record's own columns take (`id`, `revision`, the server's `rs_*`).
    public static func isReservedAttributeName(_ name: String) -> Bool {
        name == "id" || name == ReservedAttribute.revision || name.hasPrefix("rs_")
    }
}
