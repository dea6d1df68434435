/// One attribute value as it travels in a change set.
///
/// Attributes are flat: strings, numbers, booleans and null. Arrays and objects
/// decode as `.unsupported` so the server can reject the change set with a
/// precise `invalid` reason instead of refusing the whole request.
public enum JSONValue: Sendable, Hashable {
    case null
    case bool(Bool)
    case integer(Int64)
    case double(Double)
    case string(String)
    /// An array or object where a scalar was expected.
    case unsupported

    /// The value as an integer id or revision, when it is one.
    public var integerValue: Int64? {
        if case .integer(let value) = self { return value }
        return nil
    }

    public var stringValue: String? {
        if case .string(let value) = self { return value }
        return nil
    }

    public var isNull: Bool {
        if case .null = self { return true }
        return false
    }

    /// About how many bytes the value takes as JSON (escapes aside), for size limits.
    public var approximateJSONBytes: Int {
        switch self {
        case .null, .unsupported: 4
        case .bool: 5
        case .integer, .double: 20
        case .string(let text): text.utf8.count + 2
        }
    }

    /// A short name of the JSON kind, for error messages.
    public var kindName: String {
        switch self {
        case .null: "null"
        case .bool: "a boolean"
        case .integer: "an integer"
        case .double: "a number"
        case .string: "a string"
        case .unsupported: "an array or object"
        }
    }
}

extension JSONValue: Codable {
    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        // Most common kinds first: every failed attempt throws internally, which is slow.
        // Int64 before Double so that 2 stays an integer; neither decodes a boolean.
        if container.decodeNil() {
            self = .null
        } else if let value = try? container.decode(String.self) {
            self = .string(value)
        } else if let value = try? container.decode(Int64.self) {
            self = .integer(value)
        } else if let value = try? container.decode(Bool.self) {
            self = .bool(value)
        } else if let value = try? container.decode(Double.self) {
            self = .double(value)
        } else {
            self = .unsupported
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .null, .unsupported: try container.encodeNil()
        case .bool(let value): try container.encode(value)
        case .integer(let value): try container.encode(value)
        case .double(let value): try container.encode(value)
        case .string(let value): try container.encode(value)
        }
    }
}

extension JSONValue: ExpressibleByIntegerLiteral, ExpressibleByStringLiteral, ExpressibleByBooleanLiteral,
    ExpressibleByFloatLiteral, ExpressibleByNilLiteral
{
    public init(integerLiteral value: Int64) { self = .integer(value) }
    public init(stringLiteral value: String) { self = .string(value) }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(floatLiteral value: Double) { self = .double(value) }
    public init(nilLiteral: ()) { self = .null }
}
