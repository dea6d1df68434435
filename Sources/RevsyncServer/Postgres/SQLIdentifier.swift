/// Quoting of schema names in SQL. Names are checked by `SchemaLoader` (`SchemaNames`) to be
/// lowercase letters, digits and `_`, so quoting cannot be escaped.
public enum SQLIdentifier {
    public static func quoted(_ name: String) -> String { "\"\(name)\"" }
}
