import Foundation

/// Any JSON value, as the OpenAPI conformance checks read documents and response bodies.
///
/// Integers stay integers (Int64) so that `type: integer` and int64 bounds are checked exactly;
/// a number with a fraction or out of Int64's range is a `.number`.
indirect enum OpenAPIJSON: Sendable, Decodable, CustomStringConvertible {
    case null
    case bool(Bool)
    case integer(Int64)
    case number(Double)
    case string(String)
    case array([OpenAPIJSON])
    case object([String: OpenAPIJSON])

    init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let value = try? container.decode(Bool.self) {
            self = .bool(value)
        } else if let value = try? container.decode(Int64.self) {
            self = .integer(value)
        } else if let value = try? container.decode(Double.self) {
            self = .number(value)
        } else if let value = try? container.decode(String.self) {
            self = .string(value)
        } else if let value = try? container.decode([OpenAPIJSON].self) {
            self = .array(value)
        } else {
            self = .object(try container.decode([String: OpenAPIJSON].self))
        }
    }

    static func parse(_ data: Data) throws -> OpenAPIJSON {
        try JSONDecoder().decode(OpenAPIJSON.self, from: data)
    }

    subscript(key: String) -> OpenAPIJSON? {
        if case .object(let members) = self { return members[key] }
        return nil
    }

    var objectValue: [String: OpenAPIJSON]? {
        if case .object(let members) = self { return members }
        return nil
    }

    var arrayValue: [OpenAPIJSON]? {
        if case .array(let items) = self { return items }
        return nil
    }

    var stringValue: String? {
        if case .string(let text) = self { return text }
        return nil
    }

    var boolValue: Bool? {
        if case .bool(let flag) = self { return flag }
        return nil
    }

    /// The value as a number, for bounds (integers and numbers alike).
    var numericValue: Double? {
        switch self {
        case .integer(let value): Double(value)
        case .number(let value): value
        default: nil
        }
    }

    /// JSON Schema's notion of equality: 1 and 1.0 are the same number, object key order does not matter.
    func sameValue(as other: OpenAPIJSON) -> Bool {
        switch (self, other) {
        case (.null, .null): return true
        case (.bool(let a), .bool(let b)): return a == b
        case (.integer(let a), .integer(let b)): return a == b
        case (.string(let a), .string(let b)): return a == b
        case (.integer, .number), (.number, .integer), (.number, .number):
            return numericValue == other.numericValue
        case (.array(let a), .array(let b)):
            return a.count == b.count && zip(a, b).allSatisfy { $0.sameValue(as: $1) }
        case (.object(let a), .object(let b)):
            return a.count == b.count && a.allSatisfy { key, value in b[key].map { value.sameValue(as: $0) } ?? false }
        default: return false
        }
    }

    /// JSON Schema's type names that the value has (an integral number is both `integer` and `number`).
    var schemaTypes: Set<String> {
        switch self {
        case .null: ["null"]
        case .bool: ["boolean"]
        case .integer: ["integer", "number"]
        case .number(let value): value.rounded() == value && value.isFinite ? ["integer", "number"] : ["number"]
        case .string: ["string"]
        case .array: ["array"]
        case .object: ["object"]
        }
    }

    var description: String {
        switch self {
        case .null: "null"
        case .bool(let flag): String(flag)
        case .integer(let value): String(value)
        case .number(let value): String(value)
        case .string(let text): "\"\(text)\""
        case .array(let items): "[" + items.map(\.description).joined(separator: ",") + "]"
        case .object(let members):
            "{" + members.sorted { $0.key < $1.key }.map { "\"\($0.key)\":\($0.value)" }.joined(separator: ",") + "}"
        }
    }
}
