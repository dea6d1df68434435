import CZlib
import NIOCore

/// Bytes compressed on their own, ready to be joined into a larger gzip body: raw deflate
/// that ends on a byte boundary without a final block (a sync flush), with the CRC-32 and
/// length of what it holds.
///
/// A fragment never refers back before its own start, so fragments compressed apart may be
/// laid end to end as one deflate stream; `GzipAssembler` closes it into one gzip member.
/// A change set is compressed this way once, when it is committed, and then sent as is.
public struct DeflateFragment: Sendable, Hashable {
    /// Raw deflate blocks, none of them final, ending on a byte boundary.
    public let deflated: ByteBuffer
    /// The CRC-32 of the uncompressed bytes.
    public let crc: UInt32
    /// The number of uncompressed bytes.
    public let length: Int

    public init(deflated: ByteBuffer, crc: UInt32, length: Int) {
        self.deflated = deflated
        self.crc = crc
        self.length = length
    }

    /// Compression of change sets at commit: done once per change set, so it may spend more than a per-request level.
    public static let commitLevel: Int32 = 9

    /// Compresses `plain` at `level`; if zlib cannot (out of memory), stores it uncompressed instead.
    ///
    /// With a `dictionary`, the fragment may refer back into it, so it is valid only where the
    /// dictionary's bytes come right before it in the joined stream (its last 32 KiB count).
    public init(compressing plain: ByteBuffer, level: Int32 = DeflateFragment.commitLevel, dictionary: ByteBuffer? = nil) {
        let crc = Self.crc(of: plain)
        let deflated = plain.withUnsafeReadableBytes { input in
            dictionary.map { dictionary in dictionary.withUnsafeReadableBytes { Self.deflate(input, level: level, dictionary: $0) } }
                ?? Self.deflate(input, level: level, dictionary: nil)
        }
        self.init(deflated: deflated ?? Self.stored(plain), crc: crc, length: plain.readableBytes)
    }

    /// `plain` in stored (uncompressed) blocks: cheaper than zlib for a few bytes of punctuation.
    public init(storing plain: ByteBuffer) {
        self.init(deflated: Self.stored(plain), crc: Self.crc(of: plain), length: plain.readableBytes)
    }

    /// The bytes this fragment holds. `preceding` is what came before it in the joined stream: a
    /// fragment compressed with a dictionary refers back into it (its last 32 KiB are enough).
    public func inflated(after preceding: ByteBuffer = ByteBuffer()) throws(Gzip.Failure) -> ByteBuffer {
        // The preceding bytes are stored ahead of the fragment so that its references land in
        // them, as they would in a reader's window, and are cut off again after inflating.
        let window = preceding.getSlice(at: preceding.readerIndex + max(0, preceding.readableBytes - 32 * 1024),
            length: min(preceding.readableBytes, 32 * 1024)) ?? ByteBuffer()
        var assembler = GzipAssembler(capacity: window.readableBytes + deflated.readableBytes)
        if window.readableBytes > 0 { assembler.write(DeflateFragment(storing: window)) }
        assembler.write(self)
        var whole = try Gzip.inflate(assembler.finish(), maxSize: window.readableBytes + length)
        whole.moveReaderIndex(forwardBy: window.readableBytes)
        return whole
    }

    /// The CRC-32 of `bytes`, as gzip computes it.
    public static func crc(of bytes: ByteBuffer) -> UInt32 {
        bytes.withUnsafeReadableBytes { raw in
            guard let base = raw.baseAddress?.assumingMemoryBound(to: Bytef.self) else { return 0 }
            return UInt32(truncatingIfNeeded: crc32(0, base, uInt(raw.count)))
        }
    }

    /// Raw deflate (no zlib or gzip wrapper) ending with a sync flush; nil when zlib fails.
    private static func deflate(_ input: UnsafeRawBufferPointer, level: Int32, dictionary: UnsafeRawBufferPointer?) -> ByteBuffer? {
        var stream = z_stream()
        // windowBits -15: raw deflate with the full 32 KiB window every gzip reader accepts.
        guard CZlib_deflateInit2(&stream, level, -15, 8) == Z_OK else { return nil }
        defer { deflateEnd(&stream) }
        if let dictionary, let base = dictionary.baseAddress, dictionary.count > 0 {
            // zlib keeps only the window's worth of the dictionary's end, as a reader's window would.
            let kept = min(dictionary.count, 32 * 1024)
            let start = base.advanced(by: dictionary.count - kept).assumingMemoryBound(to: Bytef.self)
            guard deflateSetDictionary(&stream, start, uInt(kept)) == Z_OK else { return nil }
        }
        // The bound is for Z_FINISH; a sync flush adds at most an empty stored block (5 bytes) more.
        let bound = Int(deflateBound(&stream, uLong(input.count))) + 16
        var output = ByteBufferAllocator().buffer(capacity: bound)
        stream.next_in = input.baseAddress.map { UnsafeMutablePointer(mutating: $0.assumingMemoryBound(to: Bytef.self)) }
        stream.avail_in = uInt(input.count)
        var status = Z_OK
        repeat {
            output.reserveCapacity(minimumWritableBytes: max(64, bound / 4))
            let written = output.writeWithUnsafeMutableBytes(minimumWritableBytes: 64) { out in
                stream.next_out = out.baseAddress?.assumingMemoryBound(to: Bytef.self)
                stream.avail_out = uInt(out.count)
                status = CZlib.deflate(&stream, Z_SYNC_FLUSH)
                return out.count - Int(stream.avail_out)
            }
            guard status == Z_OK || status == Z_BUF_ERROR else { return nil }
            // Done when zlib left room unused: everything is in and flushed.
            if stream.avail_in == 0 && stream.avail_out > 0 { break }
            if written == 0 && status == Z_BUF_ERROR { return nil }
        } while true
        return output
    }

    /// Stored blocks of at most 65,535 bytes each, not final.
    private static func stored(_ plain: ByteBuffer) -> ByteBuffer {
        var rest = plain
        var output = ByteBufferAllocator().buffer(capacity: plain.readableBytes + 5 * (plain.readableBytes / 65_535 + 1))
        repeat {
            let count = min(rest.readableBytes, 65_535)
            // BFINAL 0, BTYPE 00, padded to the byte; then LEN and its complement, little endian.
            output.writeInteger(UInt8(0))
            output.writeInteger(UInt16(count), endianness: .little)
            output.writeInteger(~UInt16(count), endianness: .little)
            var slice = rest.readSlice(length: count) ?? ByteBuffer()
            output.writeBuffer(&slice)
        } while rest.readableBytes > 0
        return output
    }
}
