import CompressNIO
import NIOCore

/// Inflates one gzip member that arrives in pieces (a snapshot file downloaded to
/// disk), as strictly as `Gzip.inflate`: `finish()` demands the member's end, and
/// bytes after the end are refused.
public final class GunzipStream {
    private let decompressor: ZlibDecompressor
    private let window = 64 * 1024

    public init() throws(Gzip.Failure) {
        do {
            decompressor = try ZlibDecompressor(algorithm: .gzip)
        } catch {
            throw .corrupt
        }
    }

    /// Inflates `compressed`, handing each piece of output to `emit` as it comes.
    public func inflate(_ compressed: ByteBuffer, _ emit: (ByteBuffer) throws -> Void) throws {
        var input = compressed
        while true {
            var chunk = ByteBufferAllocator().buffer(capacity: window)
            do {
                try decompressor.inflate(from: &input, to: &chunk)
                if chunk.readableBytes > 0 { try emit(chunk) }
                // Returned without asking for room: the input is used up, or the member ended before it.
                guard input.readableBytes == 0 else { throw Gzip.Failure.corrupt }
                return
            } catch let error as CompressNIOError where error == .bufferOverflow {
                if chunk.readableBytes > 0 { try emit(chunk) }
            } catch let error as CompressNIOError where error == .inputBufferOverflow {
                if chunk.readableBytes > 0 { try emit(chunk) }
                return
            } catch is CompressNIOError {
                throw Gzip.Failure.corrupt
            }
        }
    }

    /// Throws unless the member has ended: a download cut short is refused here.
    public func finish() throws(Gzip.Failure) {
        var probe = ByteBuffer(bytes: [0])
        var sink = ByteBufferAllocator().buffer(capacity: 16)
        do {
            try decompressor.inflate(from: &probe, to: &sink)
        } catch {
            throw .corrupt
        }
        // After its end zlib consumes nothing more.
        guard probe.readableBytes == 1, sink.readableBytes == 0 else { throw .corrupt }
    }
}
