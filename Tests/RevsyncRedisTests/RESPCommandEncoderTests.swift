import NIOCore
import Testing

@testable import RevsyncRedis

@Suite struct RESPCommandEncoderTests {
    @Test func argumentsAreLengthPrefixedAndBinarySafe() throws {
        var buffer = ByteBuffer()
        try RESPCommandEncoder.encode([ByteBuffer(string: "SET"), ByteBuffer(string: "k"), ByteBuffer([0x00, 0x0D, 0x0A, 0xFF])], into: &buffer)
        let expected: [UInt8] = Array("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$4\r\n".utf8) + [0x00, 0x0D, 0x0A, 0xFF] + Array("\r\n".utf8)
        #expect(Array(buffer.readableBytesView) == expected)
    }

    @Test func emptyArgumentIsSentAsEmptyBulkString() throws {
        let buffer = try RESPCommandEncoder.encode([[ByteBuffer(string: "ECHO"), ByteBuffer()]])
        #expect(String(buffer: buffer) == "*2\r\n$4\r\nECHO\r\n$0\r\n\r\n")
    }

    @Test func pipelineIsCommandsBackToBack() throws {
        let buffer = try RESPCommandEncoder.encode([[ByteBuffer(string: "PING")], [ByteBuffer(string: "PING")]])
        #expect(String(buffer: buffer) == "*1\r\n$4\r\nPING\r\n*1\r\n$4\r\nPING\r\n")
    }

    @Test func commandWithoutNameIsRefused() {
        #expect(throws: RedisError.self) { try RESPCommandEncoder.encode([[]]) }
    }
}
