import Foundation

/// A position in JSON bytes, with readers for the values of sync requests and answers
/// (`SyncRequestReader`, `SyncResponseReader`). Each reader returns nil (or false) when the value
/// is not what it expects, leaving the position anywhere.
struct JSONCursor {
    let bytes: UnsafeRawBufferPointer
    var index = 0

    init(bytes: UnsafeRawBufferPointer) { self.bytes = bytes }

    // MARK: JSON

    /// The next byte that is not whitespace, without taking it; nil at the end.
    mutating func peek() -> UInt8? {
        while index < bytes.count {
            switch bytes[index] {
            case 0x20, 0x09, 0x0A, 0x0D: index += 1
            default: return bytes[index]
            }
        }
        return nil
    }

    mutating func take(_ byte: UInt8) -> Bool {
        guard peek() == byte else { return false }
        index += 1
        return true
    }

    /// An object, calling `member` with each key once the cursor is at its value.
    mutating func object(_ member: (inout JSONCursor, String) -> Bool) -> Bool {
        guard take(UInt8(ascii: "{")) else { return false }
        if take(UInt8(ascii: "}")) { return true }
        repeat {
            guard let key = string(), take(UInt8(ascii: ":")), member(&self, key) else { return false }
        } while take(UInt8(ascii: ","))
        return take(UInt8(ascii: "}"))
    }

    mutating func array(_ element: (inout JSONCursor) -> Bool) -> Bool {
        guard take(UInt8(ascii: "[")) else { return false }
        if take(UInt8(ascii: "]")) { return true }
        repeat {
            guard element(&self) else { return false }
        } while take(UInt8(ascii: ","))
        return take(UInt8(ascii: "]"))
    }

    mutating func null() -> Bool { literal("null") }

    mutating func literal(_ word: StaticString) -> Bool {
        guard peek() != nil, bytes.count - index >= word.utf8CodeUnitCount else { return false }
        for offset in 0..<word.utf8CodeUnitCount where bytes[index + offset] != word.utf8Start[offset] {
            return false
        }
        // Not a literal when a letter or digit follows (`null5`): the cursor stays where it
        // was, so that the caller's next try (a number, say) does not start after the word.
        let end = index + word.utf8CodeUnitCount
        guard !isNumberOrLetter(at: end) else { return false }
        index = end
        return true
    }

    /// `-?(0|[1-9][0-9]*)` within `Int64`, not followed by a fraction or an exponent.
    mutating func integer() -> Int64? {
        guard let (negative, digits) = integerPart(), !isFractionOrExponent(at: index) else { return nil }
        var value: Int64 = 0
        for position in digits {
            let digit = Int64(bytes[position] - UInt8(ascii: "0"))
            let (times, overflow) = value.multipliedReportingOverflow(by: 10)
            let (sum, overflowed) = negative ? times.subtractingReportingOverflow(digit) : times.addingReportingOverflow(digit)
            guard !overflow, !overflowed else { return nil }
            value = sum
        }
        return value
    }

    /// A number that is not an integer within `Int64` (a fraction, an exponent, more digits),
    /// as `JSONValue` decodes it. One whose nearest double has a fraction (`1.5`, the usual
    /// double) is that double, as the decoder's correctly rounded parse gives it. The rest go
    /// through `JSONDecoder` on the number's own bytes, so that whatever it makes of `2.0`,
    /// `1e+15` or `1e400` (an integer, a double, or unsupported) is what this makes of it: they
    /// are rare, as the server writes an integral double below 10^15 without a fraction.
    mutating func otherNumber() -> JSONValue? {
        guard let token = numberBytes(exponent: true) else { return nil }
        if let number = Double(String(decoding: token, as: UTF8.self)), number.isFinite, number != number.rounded(.towardZero) {
            return .double(number)
        }
        return try? JSONDecoder().decode(JSONValue.self, from: Data(token))
    }

    /// A number with an optional fraction, no exponent, as the nearest `Double` (`wait`). One
    /// that a double cannot hold (past about 1.8 × 10^308, or so small that it rounds to zero)
    /// is nil: `Double` would make it infinity or zero, and the decoder refuses it.
    mutating func number() -> Double? {
        guard let token = numberBytes(exponent: false), !isFractionOrExponent(at: index),
              let value = Double(String(decoding: token, as: UTF8.self)), value.isFinite else { return nil }
        guard value != 0 || token.allSatisfy({ $0 == UInt8(ascii: "0") || $0 == UInt8(ascii: ".") || $0 == UInt8(ascii: "-") }) else {
            return nil
        }
        return value
    }

    /// A JSON number's bytes (an exponent only if `exponent`), the cursor after them.
    private mutating func numberBytes(exponent: Bool) -> UnsafeRawBufferPointer? {
        guard peek() != nil else { return nil }
        let start = index
        guard integerPart() != nil else { return nil }
        if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
            index += 1
            guard digits() else { return nil }
        }
        if exponent, index < bytes.count, bytes[index] | 0x20 == UInt8(ascii: "e") {
            index += 1
            if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") { index += 1 }
            guard digits() else { return nil }
        }
        return UnsafeRawBufferPointer(rebasing: bytes[start..<index])
    }

    /// One or more digits, the cursor after them.
    private mutating func digits() -> Bool {
        let start = index
        while index < bytes.count, isDigit(bytes[index]) { index += 1 }
        return index > start
    }

    /// The sign and the positions of the digits of an integer, the cursor after them.
    private mutating func integerPart() -> (negative: Bool, digits: Range<Int>)? {
        guard peek() != nil else { return nil }
        let negative = bytes[index] == UInt8(ascii: "-")
        if negative { index += 1 }
        let start = index
        while index < bytes.count, isDigit(bytes[index]) { index += 1 }
        let count = index - start
        guard count > 0, count == 1 || bytes[start] != UInt8(ascii: "0") else { return nil }
        return (negative, start..<index)
    }

    /// A string, its escapes undone; nil for raw control characters, a lone surrogate or
    /// bytes that are not UTF-8.
    mutating func string() -> String? {
        guard take(UInt8(ascii: "\"")) else { return nil }
        let start = index
        while index < bytes.count {
            switch bytes[index] {
            case UInt8(ascii: "\""):
                defer { index += 1 }
                return String(validating: UnsafeRawBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self)
            case UInt8(ascii: "\\"):
                return escapedString(from: start)
            case 0..<0x20:
                return nil
            default:
                index += 1
            }
        }
        return nil
    }

    /// The rest of a string that has escapes, from its first byte at `start`.
    private mutating func escapedString(from start: Int) -> String? {
        var text = Array(UnsafeRawBufferPointer(rebasing: bytes[start..<index]))
        while index < bytes.count {
            let byte = bytes[index]
            index += 1
            switch byte {
            case UInt8(ascii: "\""):
                return String(validating: text, as: UTF8.self)
            case 0..<0x20:
                return nil
            case UInt8(ascii: "\\"):
                guard index < bytes.count else { return nil }
                let escape = bytes[index]
                index += 1
                switch escape {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): text.append(escape)
                case UInt8(ascii: "b"): text.append(0x08)
                case UInt8(ascii: "f"): text.append(0x0C)
                case UInt8(ascii: "n"): text.append(0x0A)
                case UInt8(ascii: "r"): text.append(0x0D)
                case UInt8(ascii: "t"): text.append(0x09)
                case UInt8(ascii: "u"):
                    guard let scalar = unicodeEscape() else { return nil }
                    text.append(contentsOf: String(Character(scalar)).utf8)
                default:
                    return nil
                }
            default:
                text.append(byte)
            }
        }
        return nil
    }

    /// The scalar of a `\u` escape (the cursor after the `u`), joining a surrogate pair.
    private mutating func unicodeEscape() -> Unicode.Scalar? {
        guard let unit = hexUnit() else { return nil }
        switch unit {
        case 0xD800..<0xDC00:
            guard bytes.count - index >= 2, bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u") else { return nil }
            index += 2
            guard let low = hexUnit(), (0xDC00..<0xE000).contains(low) else { return nil }
            return Unicode.Scalar(0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00))
        case 0xDC00..<0xE000:
            return nil
        default:
            return Unicode.Scalar(unit)
        }
    }

    private mutating func hexUnit() -> UInt32? {
        guard bytes.count - index >= 4 else { return nil }
        var value: UInt32 = 0
        for _ in 0..<4 {
            let byte = bytes[index]
            index += 1
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
            default: return nil
            }
            value = value << 4 | UInt32(digit)
        }
        return value
    }

    private func isDigit(_ byte: UInt8) -> Bool { byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") }

    private func isFractionOrExponent(at position: Int) -> Bool {
        guard position < bytes.count else { return false }
        let byte = bytes[position]
        return byte == UInt8(ascii: ".") || byte == UInt8(ascii: "e") || byte == UInt8(ascii: "E") || isDigit(byte)
    }

    /// Whether a literal runs on into more letters or digits (`nullx`, `true1`).
    private func isNumberOrLetter(at position: Int) -> Bool {
        guard position < bytes.count else { return false }
        let byte = bytes[position] | 0x20
        return isDigit(bytes[position]) || (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z"))
    }
}
