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

    /// Whether the bytes start with gzip's magic number.
    static func looksCompressed(_ buffer: ByteBuffer) -> Bool {
        buffer.readableBytes >= 2 && buffer.getInteger(at: buffer.readerIndex, as: UInt16.self) == 0x1f8b
    }
}
