/// A compact JSON writer for bytes that are stored and replayed verbatim.
///
/// The server writes every log entry and response with it, so the same change
/// set always has the same bytes. It never emits whitespace and escapes every
/// control character, so a raw control byte can never appear in its output:
/// the server relies on that for its revision placeholder (see `placeholder`).
public struct JSONWriter: Sendable {
    public private(set) var bytes: [UInt8] = []

    /// A byte that stands where a revision number will go once it is known.
    public static let placeholder: UInt8 = 0x01

    public init(capacity: Int = 256) { bytes.reserveCapacity(capacity) }

    public mutating func raw(_ text: StaticString) {
        text.withUTF8Buffer { bytes.append(contentsOf: $0) }
    }

    public mutating func raw<C: Collection>(bytes other: C) where C.Element == UInt8 {
        bytes.append(contentsOf: other)
    }

    public mutating func byte(_ value: UInt8) { bytes.append(value) }

    public mutating func integer(_ value: Int64) {
        bytes.append(contentsOf: String(value).utf8)
    }

    public mutating func revisionPlaceholder() { bytes.append(Self.placeholder) }

    /// `"key":` with the key escaped.
    public mutating func key(_ name: String) {
        string(name)
        bytes.append(UInt8(ascii: ":"))
    }

    public mutating func string(_ text: String) {
        bytes.append(UInt8(ascii: "\""))
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "\""): bytes.append(contentsOf: [92, 34])
            case UInt8(ascii: "\\"): bytes.append(contentsOf: [92, 92])
            case 0x0A: bytes.append(contentsOf: [92, UInt8(ascii: "n")])
            case 0x0D: bytes.append(contentsOf: [92, UInt8(ascii: "r")])
            case 0x09: bytes.append(contentsOf: [92, UInt8(ascii: "t")])
            case 0..<0x20, 0x7F:
                let hex: [UInt8] = Array("0123456789abcdef".utf8)
                bytes.append(contentsOf: [92, UInt8(ascii: "u"), 48, 48, hex[Int(byte >> 4)], hex[Int(byte & 0xF)]])
            default: bytes.append(byte)
            }
        }
        bytes.append(UInt8(ascii: "\""))
    }

    public mutating func value(_ value: JSONValue) {
        switch value {
        case .null, .unsupported: raw("null")
        case .bool(let flag): flag ? raw("true") : raw("false")
        case .integer(let number): integer(number)
        case .double(let number): double(number)
        case .string(let text): string(text)
        }
    }

    /// Finite doubles in their shortest round-trip form, integral ones without a
    /// fraction (`2`, as in the contract's example and PostgreSQL's output); non-finite
    /// ones as null (refused on input, so this is only a guard).
    public mutating func double(_ number: Double) {
        guard number.isFinite else { return raw("null") }
        if number == number.rounded(), abs(number) < 1e15 {
            integer(Int64(number))
        } else {
            bytes.append(contentsOf: number.description.utf8)
        }
    }

    /// `[1,2,3]`
    public mutating func integerArray(_ values: [Int64]) {
        bytes.append(UInt8(ascii: "["))
        for (index, value) in values.enumerated() {
            if index > 0 { bytes.append(UInt8(ascii: ",")) }
            integer(value)
        }
        bytes.append(UInt8(ascii: "]"))
    }

    public mutating func stringArray(_ values: [String]) {
        bytes.append(UInt8(ascii: "["))
        for (index, value) in values.enumerated() {
            if index > 0 { bytes.append(UInt8(ascii: ",")) }
            string(value)
        }
        bytes.append(UInt8(ascii: "]"))
    }
}
