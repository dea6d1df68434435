import CompressNIO
import Foundation
import NIOCore

/// gzip in both directions, with the checks compress-nio leaves to its caller.
enum Gzip {
    enum Failure: Error {
        /// Inflating would pass the limit.
        case tooLarge
        /// Not gzip, corrupt, truncated, or followed by extra bytes.
        case corrupt
    }

    /// Inflates one complete gzip member, never holding more than `maxSize` bytes of output.
    ///
    /// compress-nio's own `decompress(with:maxSize:)` returns what it has when the
    /// input ends early, so a truncated body would pass as a shorter one; this
    /// loop demands the end of the stream.
    static func inflate(_ compressed: ByteBuffer, maxSize: Int) throws(Failure) -> ByteBuffer {
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

    static func deflate(_ buffer: ByteBuffer) -> ByteBuffer {
        var input = buffer
        // Compressing in memory into a buffer sized by deflateBound cannot fail.
        return (try? input.compress(with: .gzip, configuration: .init(windowSize: 15, compressionLevel: 5))) ?? buffer
    }

    /// Whether an `Accept-Encoding` value allows gzip (`gzip`, `x-gzip` or `*`, not with q=0).
    static func accepted(_ header: String?) -> Bool {
        guard let header else { return false }
        for part in header.split(separator: ",") {
            let fields = part.split(separator: ";").map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
            guard let coding = fields.first, ["gzip", "x-gzip", "*"].contains(coding) else { continue }
            let quality = fields.dropFirst().first { $0.hasPrefix("q=") }.flatMap { Double($0.dropFirst(2)) } ?? 1
            let refused = quality <= 0
            if !refused { return true }
        }
        return false
    }
}

/// Compresses a stream of buffers into gzip chunks (for `/snapshot`).
final class GzipStream {
    private let compressor: ZlibCompressor
    private var window: ByteBuffer

    init() throws {
        compressor = try ZlibCompressor(algorithm: .gzip, configuration: .init(windowSize: 15, compressionLevel: 5))
        window = ByteBufferAllocator().buffer(capacity: 64 * 1024)
    }

    /// The compressed bytes for `buffer` available so far (possibly none).
    func compress(_ buffer: ByteBuffer) throws -> [ByteBuffer] {
        var input = buffer
        var out: [ByteBuffer] = []
        try input.compressStream(with: compressor, window: &window, flush: .no) { out.append($0) }
        return out
    }

    /// Everything still buffered, ending the gzip member.
    func finish() throws -> [ByteBuffer] {
        var input = ByteBuffer()
        var out: [ByteBuffer] = []
        try input.compressStream(with: compressor, window: &window, flush: .finish) { out.append($0) }
        return out
    }
}
