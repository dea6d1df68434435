import CompressNIO
import NIOCore

/// Compresses a stream of buffers into the chunks of one gzip member (for `/snapshot`).
public final class GzipStream {
    private let compressor: ZlibCompressor
    private var window: ByteBuffer

    public init() throws {
        compressor = try ZlibCompressor(algorithm: .gzip, configuration: .init(windowSize: 15, compressionLevel: 5))
        window = ByteBufferAllocator().buffer(capacity: 64 * 1024)
    }

    /// The compressed bytes for `buffer` available so far (possibly none).
    public func compress(_ buffer: ByteBuffer) throws -> [ByteBuffer] {
        var input = buffer
        var out: [ByteBuffer] = []
        try input.compressStream(with: compressor, window: &window, flush: .no) { out.append($0) }
        return out
    }

    /// Everything still buffered, ending the gzip member.
    public func finish() throws -> [ByteBuffer] {
        var input = ByteBuffer()
        var out: [ByteBuffer] = []
        try input.compressStream(with: compressor, window: &window, flush: .finish) { out.append($0) }
        return out
    }
}
