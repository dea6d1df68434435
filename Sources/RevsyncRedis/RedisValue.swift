import NIOCore

/// One Redis reply (RESP2).
///
/// Bulk strings are `ByteBuffer`s so a cached JSON document can be written
/// into an HTTP response without another copy.
public enum RedisValue: Sendable, Hashable {
    /// A simple string such as `OK` or `PONG`.
    case status(String)
    /// An error reply; its text starts with Redis's code (`ERR`, `WRONGTYPE`, `NOSCRIPT`, …).
    ///
    /// A top-level error reply to `RedisClient.command(_:)` is thrown as
    /// ``RedisError/server(message:)`` instead; this case appears in pipeline results and inside arrays.
    case error(String)
    /// An integer reply.
    case integer(Int64)
    /// A bulk string: arbitrary bytes.
    case bulk(ByteBuffer)
    /// The null bulk string or null array (a missing key, for instance).
    case null
    /// A multi-bulk reply.
    case array([RedisValue])
}

extension RedisValue {
    /// The bytes of a bulk string, `nil` for every other kind of reply.
    public var bufferValue: ByteBuffer? {
        if case .bulk(let buffer) = self { return buffer }
        return nil
    }

    /// The text of a status reply or of a UTF-8 bulk string, `nil` otherwise.
    public var stringValue: String? {
        switch self {
        case .status(let text): return text
        case .bulk(let buffer): return String(validating: buffer.readableBytesView, as: UTF8.self)
        default: return nil
        }
    }

    /// The integer of an integer reply, `nil` otherwise.
    public var int64Value: Int64? {
        if case .integer(let value) = self { return value }
        return nil
    }

    /// The elements of an array reply, `nil` otherwise.
    public var arrayValue: [RedisValue]? {
        if case .array(let values) = self { return values }
        return nil
    }

    /// Whether this is the null reply.
    public var isNull: Bool {
        if case .null = self { return true }
        return false
    }
}

extension RedisValue: CustomStringConvertible {
    /// A readable rendering for logs and test failures; non-UTF-8 bulk strings are shown as hex.
    public var description: String {
        switch self {
        case .status(let text): return "+\(text)"
        case .error(let text): return "-\(text)"
        case .integer(let value): return ":\(value)"
        case .null: return "(nil)"
        case .array(let values): return "[" + values.map(\.description).joined(separator: ", ") + "]"
        case .bulk(let buffer):
            if let text = String(validating: buffer.readableBytesView, as: UTF8.self) {
                return "\"\(text)\""
            }
            return "0x" + buffer.readableBytesView.map { byte in
                let hex = String(byte, radix: 16)
                return byte < 0x10 ? "0" + hex : hex
            }.joined()
        }
    }
}
