import CZlib
import NIOCore

/// Bytes compressed on their own, ready to be joined into a larger gzip body: raw deflate
/// blocks, none of them final, with the CRC-32 and length of what they hold.
///
/// A fragment never refers back before its own start (or before its dictionary, see
/// `init(compressing:level:dictionary:)`), so fragments compressed apart may be laid end to
/// end as one deflate stream; `GzipAssembler` closes it into one gzip member. A change set is
/// compressed this way once, when it is committed, and then sent as is.
///
/// Deflate is a stream of bits, not bytes. A fragment ends where its last block ends, which
/// is rarely on a byte boundary: `lastBits` says how many bits of its last byte belong to it,
/// and the assembler joins the next piece right after them. Ending every fragment on a byte
/// boundary instead takes a sync flush, an empty stored block of 4 bytes and up to 10 bits,
/// which on answers of one or a few change sets came to a tenth of the body.
public struct DeflateFragment: Sendable, Hashable {
    /// Raw deflate blocks, none of them final; only the low `lastBits` bits of the last byte are theirs (the rest are zero).
    public let deflated: ByteBuffer
    /// The CRC-32 of the uncompressed bytes.
    public let crc: UInt32
    /// The number of uncompressed bytes.
    public let length: Int
    /// How many bits of the last byte of `deflated` belong to the fragment: 1…8.
    public let lastBits: Int
    /// Whether the fragment must start on a byte boundary of the joined stream: it holds a
    /// stored block, whose padding to the next byte was counted from the fragment's own start.
    public let startsOnByte: Bool
    /// A few bytes of the fragment's own text, which plain bytes written after it may refer back to.
    public private(set) var landmark: Landmark?

    /// Bytes of a fragment's uncompressed text that end `fromEnd` bytes before the text's end.
    ///
    /// The assembler has only the compressed form of a fragment, so plain bytes after it
    /// cannot refer back into it, as a compressor of the whole answer would, unless it is
    /// told some of its bytes. An answer ends `"maxRevision":<r>}`, and the last change set
    /// names its revision: with the fragment's last `"revision":<r>` as its landmark, those
    /// digits cost one back-reference instead of a literal each.
    public struct Landmark: Sendable, Hashable {
        public let text: [UInt8]
        public let fromEnd: Int

        public init(text: [UInt8], fromEnd: Int) {
            self.text = text
            self.fromEnd = fromEnd
        }
    }

    /// - Parameters:
    ///   - lastBits: the bits of the last byte that belong to the fragment (8: all of it).
    ///   - startsOnByte: true unless it is known that the fragment holds no stored block.
    public init(deflated: ByteBuffer, crc: UInt32, length: Int, lastBits: Int = 8, startsOnByte: Bool = true) {
        precondition((1...8).contains(lastBits), "a fragment's last byte holds 1 to 8 of its bits")
        self.deflated = deflated
        self.crc = crc
        self.length = length
        self.lastBits = lastBits
        self.startsOnByte = startsOnByte
    }

    /// The same fragment with `landmark`, which must be bytes of its text, ending where it says.
    public func marked(_ landmark: Landmark?) -> DeflateFragment {
        var marked = self
        marked.landmark = landmark
        return marked
    }

    /// Compression of change sets at commit: done once per change set, so it may spend more than a per-request level.
    public static let commitLevel: Int32 = 9

    /// Compresses `plain` at `level`; if zlib cannot (out of memory), stores it uncompressed instead.
    ///
    /// With a `dictionary`, the fragment may refer back into it, so it is valid only where the
    /// dictionary's bytes come right before it in the joined stream (its last 32 KiB count).
    /// Many fragments in a row should share one `deflater` (`Deflater` says why).
    public init(compressing plain: ByteBuffer, level: Int32 = DeflateFragment.commitLevel, dictionary: ByteBuffer? = nil, with deflater: Deflater? = nil) {
        let crc = Self.crc(of: plain)
        let deflater = deflater ?? Deflater(level: level)
        let compressed = plain.withUnsafeReadableBytes { input in
            dictionary.map { dictionary in dictionary.withUnsafeReadableBytes { Self.deflate(input, level: level, dictionary: $0, with: deflater) } }
                ?? Self.deflate(input, level: level, dictionary: nil, with: deflater)
        }
        if let compressed {
            self.init(deflated: compressed.bytes, crc: crc, length: plain.readableBytes, lastBits: compressed.lastBits,
                startsOnByte: compressed.startsOnByte)
        } else {
            self.init(storing: plain)
        }
    }

    /// `plain` in stored (uncompressed) blocks: cheaper than zlib for a few bytes of punctuation.
    public init(storing plain: ByteBuffer) {
        self.init(deflated: Self.stored(plain), crc: Self.crc(of: plain), length: plain.readableBytes, lastBits: 8, startsOnByte: true)
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

    /// Raw deflate (no zlib or gzip wrapper) ending where its last block ends; nil when zlib fails.
    private static func deflate(_ input: UnsafeRawBufferPointer, level: Int32, dictionary: UnsafeRawBufferPointer?, with deflater: Deflater)
        -> (bytes: ByteBuffer, lastBits: Int, startsOnByte: Bool)?
    {
        guard let stream = deflater.reset(level: level) else { return nil }
        let kept = dictionary.map { Self.window(of: $0) }
        if let kept, kept.count > 0 {
            guard deflateSetDictionary(stream, kept.baseAddress?.assumingMemoryBound(to: Bytef.self), uInt(kept.count)) == Z_OK else { return nil }
        }
        // The bound is for Z_FINISH; the sync flush at the end adds at most an empty stored block (5 bytes) more.
        let bound = Int(deflateBound(stream, uLong(input.count))) + 16
        var output = ByteBufferAllocator().buffer(capacity: bound)
        stream.pointee.next_in = input.baseAddress.map { UnsafeMutablePointer(mutating: $0.assumingMemoryBound(to: Bytef.self)) }
        stream.pointee.avail_in = uInt(input.count)
        // Z_BLOCK ends the last block and holds its last 0…7 bits back; the sync flush after it
        // writes them out, followed by the empty stored block that is then cut off again.
        var blocksEnd: (bytes: Int, bits: Int)?
        var flush = Z_BLOCK
        repeat {
            output.reserveCapacity(minimumWritableBytes: max(64, bound / 4))
            var status = Z_OK
            let written = output.writeWithUnsafeMutableBytes(minimumWritableBytes: 64) { out in
                stream.pointee.next_out = out.baseAddress?.assumingMemoryBound(to: Bytef.self)
                stream.pointee.avail_out = uInt(out.count)
                status = CZlib.deflate(stream, flush)
                return out.count - Int(stream.pointee.avail_out)
            }
            guard status == Z_OK || status == Z_BUF_ERROR, written > 0 || stream.pointee.avail_out > 0 else { return nil }
            // A call is complete when zlib left room unused: everything is in and written.
            guard stream.pointee.avail_in == 0 && stream.pointee.avail_out > 0 else { continue }
            if flush == Z_SYNC_FLUSH { break }
            var pendingBytes: UInt32 = 0
            var pendingBits: Int32 = 0
            guard deflatePending(stream, &pendingBytes, &pendingBits) == Z_OK, pendingBytes == 0 else { return nil }
            blocksEnd = (output.readableBytes, Int(pendingBits))
            flush = Z_SYNC_FLUSH
        } while true
        guard let (wholeBytes, heldBits) = blocksEnd else { return nil }
        // Keep the whole bytes and, when bits were held back, the byte that holds them, with
        // the stored block's header and padding above them cleared.
        let length = wholeBytes + (heldBits > 0 ? 1 : 0)
        guard output.readableBytes >= length + 4 else { return nil }
        output.moveWriterIndex(to: output.readerIndex + length)
        if heldBits > 0 {
            let index = output.readerIndex + length - 1
            output.setInteger(output.getInteger(at: index, as: UInt8.self)! & UInt8((1 << heldBits) - 1), at: index)
        }
        let lastBits = heldBits > 0 ? heldBits : 8
        // Short input is one block, whose type is in its header's bits: no walk. The walk (an
        // inflate, with its state and window set up anew) was a fifth of a commit's compressing.
        let startsOnByte =
            level > 0 && input.count < Deflater.singleBlockInput && Deflater.endsBlocksAsZlib
            ? Self.firstBlockIsStored(output)
            : output.withUnsafeReadableBytes { Self.holdsStoredBlock($0, lastBits: lastBits, dictionary: kept) }
        return (output, lastBits, startsOnByte)
    }

    /// The last 32 KiB of a dictionary: all zlib keeps, as a reader's window would.
    private static func window(of dictionary: UnsafeRawBufferPointer) -> UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(rebasing: dictionary[max(0, dictionary.count - 32 * 1024)...])
    }

    /// Whether the block `deflated` begins with is stored: its header's BTYPE (bits 1–2 of the
    /// first byte; a fragment begins on a byte) is 00. No block at all (empty input) is none.
    static func firstBlockIsStored(_ deflated: ByteBuffer) -> Bool {
        guard let first = deflated.getInteger(at: deflated.readerIndex, as: UInt8.self) else { return false }
        return first & 0b110 == 0
    }

    /// Whether any block of `deflated` is stored (or the blocks cannot be walked, which then
    /// counts as stored: the fragment is only ever placed on a byte boundary).
    ///
    /// zlib chooses a stored block wherever it is smaller (incompressible text, often short
    /// non-ASCII strings), and its padding runs to the next byte boundary *of the fragment*;
    /// shifted by a few bits into a joined stream it would be read wrong. Inflating with
    /// `Z_BLOCK` stops at every block boundary, where the next block's header can be read.
    static func holdsStoredBlock(_ deflated: UnsafeRawBufferPointer, lastBits: Int, dictionary: UnsafeRawBufferPointer?) -> Bool {
        guard let base = deflated.baseAddress?.assumingMemoryBound(to: Bytef.self), deflated.count > 0 else { return false }
        let endBit = (deflated.count - 1) * 8 + lastBits
        var stream = z_stream()
        guard CZlib_inflateInit2(&stream, -15) == Z_OK else { return true }
        defer { inflateEnd(&stream) }
        if let dictionary, dictionary.count > 0 {
            guard inflateSetDictionary(&stream, dictionary.baseAddress?.assumingMemoryBound(to: Bytef.self), uInt(dictionary.count)) == Z_OK else { return true }
        }
        stream.next_in = UnsafeMutablePointer(mutating: base)
        stream.avail_in = uInt(deflated.count)
        // The inflated bytes are not needed, only the walk; zlib keeps its own window.
        var sink = [Bytef](repeating: 0, count: 16 * 1024)
        var boundary = 0
        while true {
            // The header of the block starting at `boundary`: BFINAL, then BTYPE (00: stored).
            let header = (Int(base[boundary / 8]) | (boundary / 8 + 1 < deflated.count ? Int(base[boundary / 8 + 1]) << 8 : 0)) >> (boundary % 8)
            if header & 0b110 == 0 { return true }
            var status = Z_OK
            repeat {
                status = sink.withUnsafeMutableBufferPointer { out in
                    stream.next_out = out.baseAddress
                    stream.avail_out = uInt(out.count)
                    return inflate(&stream, Z_BLOCK)
                }
            } while status == Z_OK && stream.data_type & 128 == 0 && stream.avail_in > 0
            guard status == Z_OK, stream.data_type & 128 != 0 else { return true }
            // At a block boundary: the bits read so far, less those left unused in the last byte.
            boundary = Int(stream.total_in) * 8 - Int(stream.data_type & 63)
            if boundary >= endBit { return boundary != endBit }
        }
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
