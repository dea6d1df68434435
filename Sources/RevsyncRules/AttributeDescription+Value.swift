import RevsyncWire

/// Why a value does not fit an attribute, as the end of a sentence that begins
/// with the attribute: `must be a string, not an integer`.
public struct ValueProblem: Error, Sendable, Hashable {
    public let message: String

    public init(_ message: String) {
        self.message = message
    }
}

extension AttributeDescription {
    /// Checks `value` against the attribute's type and nullability and returns its
    /// canonical form: integers are accepted for doubles, timestamps become the
    /// canonical UTC form. A reference may not hold 0; whether its target exists
    /// is for the caller to decide.
    public func checked(_ value: JSONValue) throws(ValueProblem) -> JSONValue {
        func wrong(_ expected: String) -> ValueProblem {
            ValueProblem("must be \(expected), not \(value.kindName)")
        }
        if value.isNull {
            guard nullable else { throw ValueProblem("may not be null") }
            return .null
        }
        switch (type, value) {
        case (.string, .string(let text)):
            // PostgreSQL's text cannot hold U+0000: the contract refuses it everywhere.
            guard !text.unicodeScalars.contains("\u{0}") else {
                throw ValueProblem("contains a NUL character (U+0000), which text cannot hold")
            }
            return value
        case (.boolean, .bool), (.double, .double):
            return value
        case (.double, .integer(let number)):
            return .double(Double(number))
        case (.integer, .integer(let number)):
            if references != nil, number == 0 { throw ValueProblem("holds 0, which is no record id") }
            return value
        case (.timestamp, .string(let text)):
            guard let canonical = Timestamp.canonical(text) else {
                throw ValueProblem("is not a timestamp (ISO 8601 or PostgreSQL form, years 1-9999): \"\(text)\"")
            }
            return .string(canonical)
        case (.string, _): throw wrong("a string")
        case (.boolean, _): throw wrong("a boolean")
        case (.double, _): throw wrong("a number")
        case (.integer, _): throw wrong("an integer")
        case (.timestamp, _): throw wrong("a timestamp string")
        }
    }
}
