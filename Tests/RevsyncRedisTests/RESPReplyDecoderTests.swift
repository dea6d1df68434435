import NIOCore
import Testing

@testable import RevsyncRedis

@Suite struct RESPReplyDecoderTests {
    /// One reply of every kind, nested, with a binary bulk string holding CR and LF.
    static let wire: [UInt8] =
        Array("*7\r\n+OK\r\n-ERR no such key\r\n:-42\r\n$4\r\n".utf8) + [0x00, 0x0D, 0x0A, 0xFF]
        + Array("\r\n$-1\r\n*2\r\n$0\r\n\r\n:9223372036854775807\r\n*-1\r\n".utf8)
    static let expected = RedisValue.array([
        .status("OK"), .error("ERR no such key"), .integer(-42), .bulk(ByteBuffer([0x00, 0x0D, 0x0A, 0xFF])), .null,
        .array([.bulk(ByteBuffer()), .integer(Int64.max)]), .null,
    ])

    @Test func everyKindOfReplyIsRead() throws {
        let buffer = ByteBuffer(bytes: Self.wire)
        let (value, end) = try #require(try RESPReplyDecoder.reply(in: buffer, at: buffer.readerIndex))
        #expect(value == Self.expected)
        #expect(end == buffer.writerIndex)
    }

    @Test func aReplyCutAnywhereIsNotReadUntilItIsWhole() throws {
        for length in 0..<Self.wire.count {
            let buffer = ByteBuffer(bytes: Self.wire.prefix(length))
            #expect(try RESPReplyDecoder.reply(in: buffer, at: buffer.readerIndex) == nil, "cut after \(length) bytes")
        }
    }

    @Test func aReplyArrivingAByteAtATimeIsWholeOnlyAtItsLastByte() throws {
        for chunk in [1, 3, 7] {
            var decoder = RESPReplyDecoder()
            var buffer = ByteBuffer(string: "xx")
            buffer.moveReaderIndex(forwardBy: 2)
            var sent = 0
            while sent < Self.wire.count {
                let next = min(sent + chunk, Self.wire.count)
                buffer.writeBytes(Self.wire[sent..<next])
                sent = next
                #expect(try decoder.checkWhole(buffer) == (sent == Self.wire.count), "\(sent) of \(Self.wire.count) bytes in chunks of \(chunk)")
            }
            let (value, _) = try #require(try RESPReplyDecoder.reply(in: buffer, at: buffer.readerIndex))
            #expect(value == Self.expected)
            // The check starts afresh for the next reply.
            buffer.moveReaderIndex(to: buffer.writerIndex)
            buffer.writeString(":1\r")
            #expect(try decoder.checkWhole(buffer) == false)
            buffer.writeString("\n")
            #expect(try decoder.checkWhole(buffer) == true)
        }
    }

    @Test func repliesBackToBackAreReadOneAfterTheOther() throws {
        var buffer = ByteBuffer(string: "xx")
        buffer.moveReaderIndex(forwardBy: 2)  // a reader index past 0, as in a connection's buffer
        buffer.writeString("$3\r\nabc\r\n:7\r\n")
        let (first, afterFirst) = try #require(try RESPReplyDecoder.reply(in: buffer, at: buffer.readerIndex))
        let (second, afterSecond) = try #require(try RESPReplyDecoder.reply(in: buffer, at: afterFirst))
        #expect(first == .bulk(ByteBuffer(string: "abc")))
        #expect(second == .integer(7))
        #expect(afterSecond == buffer.writerIndex)
    }

    @Test func malformedRepliesAreProtocolErrors() {
        for wire in ["!3\r\n", ":12a\r\n", ":\r\n", "$3\r\nabcd\r\n", "*-2\r\n", "+OK\rX", ":99999999999999999999\r\n"] {
            #expect(throws: RedisError.self, "\(wire.debugDescription)") {
                try RESPReplyDecoder.reply(in: ByteBuffer(string: wire), at: 0)
            }
            if wire != "$3\r\nabcd\r\n" {  // its length is checked only when the value is built
                var decoder = RESPReplyDecoder()
                #expect(throws: RedisError.self, "\(wire.debugDescription)") { try decoder.checkWhole(ByteBuffer(string: wire)) }
            }
        }
    }
}
