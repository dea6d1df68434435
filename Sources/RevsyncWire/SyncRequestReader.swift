/// Reads the usual shape of a `POST /sync` body straight from its bytes, without
/// Foundation's `JSONDecoder`, which took about 8 % of the server's CPU with 32 writers
/// (its generic containers, for a body of a couple of hundred bytes).
///
/// It answers only what it is sure of: when it returns a request, that request equals what
/// `JSONDecoder` decodes from the same bytes. Anything outside the usual shape, and anything
/// invalid, gives nil, and the caller decodes with `JSONDecoder`, which also words the error:
/// numbers with a fraction or an exponent (except `wait`), integers beyond `Int64`, keys this
/// reader does not know (`reason`, `conflict`, … and unknown top-level keys, which the decoder
/// ignores), a key twice in one object, attribute values that are arrays or objects, a lone
/// surrogate in a string. `SyncRequestReaderTests` compares the two on many bodies.
public enum SyncRequestReader {
    public static func read(_ bytes: UnsafeRawBufferPointer) -> SyncRequest? {
        var cursor = JSONCursor(bytes: bytes)
        guard let request = cursor.request(), cursor.peek() == nil else { return nil }
        return request
    }

    public static func read(_ bytes: [UInt8]) -> SyncRequest? {
        bytes.withUnsafeBytes { read($0) }
    }
}

/// A position in JSON bytes, with readers for the values a sync request holds. Each reader
/// returns nil (or false) when the value is not what it expects, leaving the position anywhere.
private struct JSONCursor {
    let bytes: UnsafeRawBufferPointer
    var index = 0

    init(bytes: UnsafeRawBufferPointer) { self.bytes = bytes }

    // MARK: The request's shape

    mutating func request() -> SyncRequest? {
        var maxRevision: Int64?, changeSets: [ChangeSet]?, wait: Double?, history: String?, seen: Set<String> = []
        let read = object { cursor, key in
            guard seen.insert(key).inserted else { return false }
            switch key {
            case "maxRevision":
                maxRevision = cursor.integer()
                return maxRevision != nil
            case "changeSets":
                var sets: [ChangeSet] = []
                let read = cursor.array { cursor in
                    guard let changeSet = cursor.changeSet() else { return false }
                    sets.append(changeSet)
                    return true
                }
                changeSets = sets
                return read
            case "wait":
                if cursor.null() { return true }
                wait = cursor.number()
                return wait != nil
            case "history":
                if cursor.null() { return true }
                history = cursor.string()
                return history != nil
            default:
                return false
            }
        }
        guard read, let maxRevision, let changeSets else { return nil }
        return SyncRequest(maxRevision: maxRevision, changeSets: changeSets, wait: wait, history: history)
    }

    mutating func changeSet() -> ChangeSet? {
        var changeSet = ChangeSet()
        var seen: Set<String> = []
        let read = object { cursor, key in
            guard seen.insert(key).inserted else { return false }
            switch key {
            case "seq":
                if cursor.null() { return true }
                changeSet.seq = cursor.integer()
                return changeSet.seq != nil
            case "types":
                if cursor.null() { return true }
                var types: [String] = []
                let read = cursor.array { cursor in
                    guard let name = cursor.string() else { return false }
                    types.append(name)
                    return true
                }
                changeSet.types = types
                return read
            case _ where ChangeSet.reservedKeys.contains(key):
                return false
            default:
                guard let changes = cursor.entityChanges() else { return false }
                changeSet.entities[key] = changes
                return true
            }
        }
        // The decoder's rules: each listed entity once, with its object, and no object unlisted.
        guard read, Set(changeSet.types).count == changeSet.types.count,
            changeSet.entities.count == changeSet.types.count,
            changeSet.types.allSatisfy({ changeSet.entities[$0] != nil })
        else { return nil }
        return changeSet
    }

    mutating func entityChanges() -> EntityChanges? {
        var changes = EntityChanges()
        var seen: Set<String> = []
        let read = object { cursor, key in
            guard seen.insert(key).inserted else { return false }
            switch key {
            case "create": return cursor.integers(into: &changes.create)
            case "update": return cursor.integers(into: &changes.update)
            case "delete": return cursor.integers(into: &changes.delete)
            case "attributes":
                return cursor.object { cursor, key in
                    // Only the canonical decimal form, as the decoder requires.
                    guard let id = Int64(key), String(id) == key, changes.attributes[id] == nil,
                        let values = cursor.attributes()
                    else { return false }
                    changes.attributes[id] = values
                    return true
                }
            default:
                return false
            }
        }
        return read ? changes : nil
    }

    /// An array of integers, or null for none.
    mutating func integers(into list: inout [Int64]) -> Bool {
        if null() { return true }
        return array { cursor in
            guard let value = cursor.integer() else { return false }
            list.append(value)
            return true
        }
    }

    mutating func attributes() -> Attributes? {
        var values: Attributes = [:]
        let read = object { cursor, name in
            guard values[name] == nil, let value = cursor.scalar() else { return false }
            values[name] = value
            return true
        }
        return read ? values : nil
    }

    /// An attribute value as `JSONValue` decodes it; nil for numbers that are not integers
    /// within `Int64`, and for arrays and objects.
    mutating func scalar() -> JSONValue? {
        switch peek() {
        case UInt8(ascii: "\""): string().map { .string($0) }
        case UInt8(ascii: "n"): null() ? .null : nil
        case UInt8(ascii: "t"): literal("true") ? .bool(true) : nil
        case UInt8(ascii: "f"): literal("false") ? .bool(false) : nil
        default: integer().map { .integer($0) }
        }
    }

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

    /// A number with an optional fraction, no exponent, as the nearest `Double` (`wait`).
    mutating func number() -> Double? {
        guard peek() != nil else { return nil }
        let start = index
        guard integerPart() != nil else { return nil }
        if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
            index += 1
            let fraction = index
            while index < bytes.count, isDigit(bytes[index]) { index += 1 }
            guard index > fraction else { return nil }
        }
        guard !isFractionOrExponent(at: index) else { return nil }
        return Double(String(decoding: UnsafeRawBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self))
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
