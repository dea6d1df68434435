import CompressNIO
import NIOCore

/// gzip for HTTP bodies, the same on the server and the device, with the checks
/// compress-nio leaves to its caller.
public enum Gzip {
    public enum Failure: Error, Sendable, Hashable {
        /// Inflating would pass the limit.
        case tooLarge
        /// Not gzip, corrupt, truncated, or followed by extra bytes.
        case corrupt
    }

    /// Inflates one complete gzip member, never holding more than `maxSize` bytes of output.
    ///
    /// compress-nio's own `decompress(with:maxSize:)` returns what it has when the
    /// input ends early, so a truncated body would pass as a shorter one; this
    /// loop demands the end of the stream, and refuses bytes after it.
    public static func inflate(_ compressed: ByteBuffer, maxSize: Int) throws(Failure) -> ByteBuffer {
        var input = compressed
        let window = 64 * 1024
        var output = ByteBufferAllocator().buffer(capacity: min(maxSize, max(window, compressed.readableBytes * 4)))
        do {
            let decompressor = try ZlibDecompressor(algorithm: .gzip)
            while true {
                var chunk = ByteBufferAllocator().buffer(capacity: window)
                do {
                    try decompressor.inflate(from: &input, to: &chunk)
                    guard output.readableBytes + chunk.readableBytes <= maxSize else { throw Failure.tooLarge }
                    output.writeBuffer(&chunk)
                    break
                } catch let error as CompressNIOError where error == .bufferOverflow {
                    guard output.readableBytes + chunk.readableBytes <= maxSize else { throw Failure.tooLarge }
                    output.writeBuffer(&chunk)
                }
            }
            // The stream ended only if zlib reached its end: then it consumes nothing more.
            guard input.readableBytes == 0 else { throw Failure.corrupt }
            var probe = ByteBuffer(bytes: [0])
            var sink = ByteBufferAllocator().buffer(capacity: 16)
            try decompressor.inflate(from: &probe, to: &sink)
            guard probe.readableBytes == 1, sink.readableBytes == 0 else { throw Failure.corrupt }
            return output
        } catch let failure as Failure {
            throw failure
        } catch {
            throw Failure.corrupt
        }
    }

    /// One gzip member holding `buffer`.
    public static func deflate(_ buffer: ByteBuffer) -> ByteBuffer {
        var input = buffer
        // Compressing in memory into a buffer sized by deflateBound cannot fail.
        return (try? input.compress(with: .gzip, configuration: .init(windowSize: 15, compressionLevel: 5))) ?? buffer
    }
}
