import CompressNIO
import NIOCore

/// gzip for request and response bodies.
enum Gzip {
    static func compress(_ buffer: ByteBuffer) throws -> ByteBuffer {
        var input = buffer
        return try input.compress(with: .gzip())
    }

    /// Inflates `buffer`; fails beyond `maxSize` bytes of output.
    static func decompress(_ buffer: ByteBuffer, maxSize: Int) throws -> ByteBuffer {
        var input = buffer
        return try input.decompress(with: .gzip(), maxSize: maxSize)
    }

    static func compress(bytes: [UInt8]) throws -> [UInt8] {
        let output = try compress(ByteBuffer(bytes: bytes))
        return Array(output.readableBytesView)
    }

    static func decompress(bytes: [UInt8], maxSize: Int) throws -> [UInt8] {
        let output = try decompress(ByteBuffer(bytes: bytes), maxSize: maxSize)
        return Array(output.readableBytesView)
    }
}
