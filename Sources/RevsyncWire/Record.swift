/// The attributes of one record in a change set, keyed by attribute name.
///
/// Besides the schema's attributes it may hold the contract's bookkeeping keys
/// `revision` and `__oldId__`.
public typealias Attributes = [String: JSONValue]

public enum ReservedAttribute {
    /// The revision of the change set that last wrote the record.
    public static let revision = "revision"
    /// The device's temporary id of a record it created (only in responses to that device).
    public static let oldId = "__oldId__"
}
