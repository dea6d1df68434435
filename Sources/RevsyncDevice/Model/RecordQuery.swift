import RevsyncWire

/// A simple query over one entity: conditions joined by AND, an order and a limit.
///
/// ```swift
/// let query = RecordQuery()
///     .where("team_id", .equal, .integer(teamId))
///     .sorted(by: "number")
///     .limited(to: 20)
/// ```
/// `id` and `revision` may be used like attributes. Comparing with `.null`:
/// `.equal` means IS NULL, `.notEqual` IS NOT NULL, the others match nothing.
/// Values order as in SQLite: null, then numbers, then strings (byte order).
public struct RecordQuery: Sendable, Hashable {
    public enum Comparison: Sendable, Hashable {
        case equal, notEqual, less, lessOrEqual, greater, greaterOrEqual
    }

    public struct Condition: Sendable, Hashable {
        public var attribute: String
        public var comparison: Comparison
        public var value: JSONValue

        public init(_ attribute: String, _ comparison: Comparison, _ value: JSONValue) {
            self.attribute = attribute
            self.comparison = comparison
            self.value = value
        }
    }

    public struct SortKey: Sendable, Hashable {
        public var attribute: String
        public var ascending: Bool

        public init(_ attribute: String, ascending: Bool = true) {
            self.attribute = attribute
            self.ascending = ascending
        }
    }

    public var conditions: [Condition]
    /// Sort keys; ties (and an empty order) are broken by id, ascending.
    public var order: [SortKey]
    public var limit: Int?

    public init(conditions: [Condition] = [], order: [SortKey] = [], limit: Int? = nil) {
        self.conditions = conditions
        self.order = order
        self.limit = limit
    }

    /// Every record, by id.
    public static let all = RecordQuery()

    public func `where`(_ attribute: String, _ comparison: Comparison, _ value: JSONValue) -> RecordQuery {
        var copy = self
        copy.conditions.append(Condition(attribute, comparison, value))
        return copy
    }

    public func sorted(by attribute: String, ascending: Bool = true) -> RecordQuery {
        var copy = self
        copy.order.append(SortKey(attribute, ascending: ascending))
        return copy
    }

    public func limited(to limit: Int) -> RecordQuery {
        var copy = self
        copy.limit = limit
        return copy
    }
}
