import NIOCore

/// Reads RESP2 replies off a connection's bytes, one `RedisValue` per reply.
///
/// Bulk strings are slices of the bytes read, not copies: a catch-up's change sets go from
/// the socket into the HTTP response without being copied on the way.
///
/// A reply is handed on only once it has arrived whole. A large one (an `MGET` of thousands
/// of change sets) arrives over many reads; each read only checks the bytes that came since
/// the last, skipping bulk strings by their stated length, and the values are built once, at
/// the end. (Parsing the reply anew at every read cost time in the square of its size, and it
/// runs on an event loop.)
struct RESPReplyDecoder: ByteToMessageDecoder {
    typealias InboundOut = RedisValue

    /// How far past the reader index the current reply is known to be well formed and whole:
    /// the offset of the next header to check.
    private var checked = 0
    /// Elements still to come of each array the check is inside, the innermost last.
    private var openArrays: [Int64] = []

    mutating func decode(context: ChannelHandlerContext, buffer: inout ByteBuffer) throws -> DecodingState {
        guard try checkWhole(buffer) else { return .needMoreData }
        guard let (value, end) = try Self.reply(in: buffer, at: buffer.readerIndex) else {
            throw RedisError.protocolError("a reply checked whole could not be read")
        }
        buffer.moveReaderIndex(to: end)
        context.fireChannelRead(wrapInboundOut(value))
        return .continue
    }

    mutating func decodeLast(context: ChannelHandlerContext, buffer: inout ByteBuffer, seenEOF: Bool) throws -> DecodingState {
        // Whatever is left is a reply cut short; the command handler fails its caller when the channel closes.
        while try decode(context: context, buffer: &buffer) == .continue {}
        return .needMoreData
    }

    /// Whether the reply at the reader index has arrived whole, going on from where the last check stopped.
    mutating func checkWhole(_ buffer: ByteBuffer) throws(RedisError) -> Bool {
        var index = buffer.readerIndex + checked
        scan: while true {
            guard let (kind, header, afterHeader) = try Self.line(in: buffer, at: index) else { break scan }
            var next = afterHeader
            switch kind {
            case UInt8(ascii: "+"), UInt8(ascii: "-"):
                break
            case UInt8(ascii: ":"):
                _ = try Self.integer(of: header, in: buffer)
            case UInt8(ascii: "$"):
                let length = try Self.integer(of: header, in: buffer)
                guard length >= -1, length <= Int64(Int32.max) else { throw .protocolError("a bulk string of \(length) bytes") }
                if length >= 0 {
                    next = afterHeader + Int(length) + 2
                    guard next <= buffer.writerIndex else { break scan }
                }
            case UInt8(ascii: "*"):
                let count = try Self.integer(of: header, in: buffer)
                guard count >= -1, count <= Int64(Int32.max) else { throw .protocolError("an array of \(count) elements") }
                if count > 0 {
                    openArrays.append(count)
                    index = next
                    checked = index - buffer.readerIndex
                    continue
                }
            default:
                throw .protocolError("a reply starting with byte \(kind), which RESP2 does not define")
            }
            // One element is whole, and with it every array it was the last element of.
            index = next
            checked = index - buffer.readerIndex
            while let last = openArrays.last {
                if last > 1 {
                    openArrays[openArrays.count - 1] = last - 1
                    break
                }
                openArrays.removeLast()
            }
            if openArrays.isEmpty {
                checked = 0
                return true
            }
        }
        return false
    }

    /// The reply that starts at `index`, and the index just past it; `nil` while it has not arrived whole.
    static func reply(in buffer: ByteBuffer, at index: Int) throws(RedisError) -> (RedisValue, Int)? {
        guard let (kind, header, afterHeader) = try line(in: buffer, at: index) else { return nil }
        switch kind {
        case UInt8(ascii: "+"):
            return (.status(text(of: header, in: buffer)), afterHeader)
        case UInt8(ascii: "-"):
            return (.error(text(of: header, in: buffer)), afterHeader)
        case UInt8(ascii: ":"):
            return (.integer(try integer(of: header, in: buffer)), afterHeader)
        case UInt8(ascii: "$"):
            let length = try integer(of: header, in: buffer)
            if length == -1 { return (.null, afterHeader) }
            guard length >= 0, length <= Int64(Int32.max) else { throw .protocolError("a bulk string of \(length) bytes") }
            let end = afterHeader + Int(length)
            guard end + 2 <= buffer.writerIndex else { return nil }
            guard buffer.getInteger(at: end, as: UInt16.self) == Self.lineEnd else {
                throw .protocolError("a bulk string of \(length) bytes is not followed by CRLF")
            }
            return (.bulk(buffer.getSlice(at: afterHeader, length: Int(length)) ?? ByteBuffer()), end + 2)
        case UInt8(ascii: "*"):
            let count = try integer(of: header, in: buffer)
            if count == -1 { return (.null, afterHeader) }
            guard count >= 0, count <= Int64(Int32.max) else { throw .protocolError("an array of \(count) elements") }
            var elements: [RedisValue] = []
            // A stated count is not yet memory that arrived: reserve no more than a reply could plausibly hold.
            elements.reserveCapacity(min(Int(count), 4096))
            var next = afterHeader
            for _ in 0..<count {
                guard let (element, end) = try reply(in: buffer, at: next) else { return nil }
                elements.append(element)
                next = end
            }
            return (.array(elements), next)
        default:
            throw .protocolError("a reply starting with byte \(kind), which RESP2 does not define")
        }
    }

    /// `\r\n` as `getInteger` reads it (big-endian).
    private static let lineEnd: UInt16 = 0x0D0A

    /// The type byte at `index`, the range of the header after it, and the index past its CRLF.
    static func line(in buffer: ByteBuffer, at index: Int) throws(RedisError) -> (UInt8, Range<Int>, Int)? {
        let end = buffer.withUnsafeReadableBytes { bytes -> Int? in
            let base = buffer.readerIndex
            var position = index + 1 - base
            while position + 1 < bytes.count {
                if bytes[position] == UInt8(ascii: "\r") { return position + base }
                position += 1
            }
            return nil
        }
        guard let end, let kind = buffer.getInteger(at: index, as: UInt8.self) else { return nil }
        guard buffer.getInteger(at: end + 1, as: UInt8.self) == UInt8(ascii: "\n") else {
            throw .protocolError("a reply header holds a CR without LF")
        }
        return (kind, (index + 1)..<end, end + 2)
    }

    private static func text(of range: Range<Int>, in buffer: ByteBuffer) -> String {
        buffer.getString(at: range.lowerBound, length: range.count) ?? ""
    }

    static func integer(of range: Range<Int>, in buffer: ByteBuffer) throws(RedisError) -> Int64 {
        let negative = buffer.getInteger(at: range.lowerBound, as: UInt8.self) == UInt8(ascii: "-")
        let digits = negative ? range.dropFirst() : range[...]
        guard !digits.isEmpty, digits.count <= 19 else {
            throw .protocolError("\"\(text(of: range, in: buffer))\" is not a number RESP allows in a reply header")
        }
        var value: Int64 = 0
        for index in digits {
            guard let digit = buffer.getInteger(at: index, as: UInt8.self), (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(digit) else {
                throw .protocolError("\"\(text(of: range, in: buffer))\" is not a number")
            }
            let (shifted, overflow) = value.multipliedReportingOverflow(by: 10)
            let (sum, carried) = shifted.addingReportingOverflow(Int64(digit - UInt8(ascii: "0")))
            guard !overflow, !carried else { throw .protocolError("\"\(text(of: range, in: buffer))\" does not fit 64 bits") }
            value = sum
        }
        return negative ? -value : value
    }
}
