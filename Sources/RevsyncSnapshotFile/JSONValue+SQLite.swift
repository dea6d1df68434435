import GRDB
import RevsyncWire

extension JSONValue {
    /// The value as SQLite stores it (booleans as 0 and 1): the device's records and the
    /// server's snapshot files alike.
    public var databaseValue: DatabaseValue {
        switch self {
        case .null, .unsupported: .null
        case .bool(let flag): (flag ? Int64(1) : Int64(0)).databaseValue
        case .integer(let number): number.databaseValue
        case .double(let number): number.databaseValue
        case .string(let text): text.databaseValue
        }
    }

    /// A stored value read back as the attribute's type.
    public init(_ value: DatabaseValue, as type: AttributeType) {
        switch (value.storage, type) {
        case (.null, _): self = .null
        case (.int64(let number), .boolean): self = .bool(number != 0)
        case (.int64(let number), .double): self = .double(Double(number))
        case (.int64(let number), .string), (.int64(let number), .timestamp): self = .string(String(number))
        case (.int64(let number), .integer): self = .integer(number)
        case (.double(let number), .integer) where number.rounded() == number && abs(number) < 9.0e18: self = .integer(Int64(number))
        case (.double(let number), .boolean): self = .bool(number != 0)
        case (.double(let number), _): self = .double(number)
        case (.string(let text), _): self = .string(text)
        case (.blob(let data), _): self = .string(String(decoding: data, as: UTF8.self))
        }
    }
}
