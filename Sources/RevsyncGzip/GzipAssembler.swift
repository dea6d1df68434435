import CZlib
import NIOCore

/// Builds one gzip member from fragments compressed earlier and plain bytes between them
/// (the JSON punctuation of a response), without compressing the fragments again.
///
/// The body is the gzip header, the fragments and the compressed plain pieces laid end to
/// end, a final empty block, and a trailer whose CRC-32 is combined from the pieces'
/// (`crc32_combine`). It is always a single member: several members would be valid gzip,
/// but curl, AsyncHTTPClient and URLSession on Linux stop after the first, and browsers
/// silently truncate.
public struct GzipAssembler {
    private var output: ByteBuffer
    /// Plain bytes written since the last fragment, compressed together when the next fragment comes.
    private var pending: ByteBuffer
    private var crc: UInt32 = 0
    private var length: UInt64 = 0
    /// Plain pieces up to this size are stored: their compressed form would be no smaller.
    static let storedUpTo = 64

    /// - Parameter capacity: the expected size of the compressed body.
    public init(capacity: Int) {
        output = ByteBufferAllocator().buffer(capacity: capacity + 32)
        // ID1 ID2, deflate, no flags, no time, no extra flags, OS Unix (as zlib writes it).
        output.writeBytes([0x1f, 0x8b, 0x08, 0x00, 0, 0, 0, 0, 0x00, 0x03])
        pending = ByteBufferAllocator().buffer(capacity: 256)
    }

    public mutating func write(_ plain: ByteBuffer) {
        var plain = plain
        pending.writeBuffer(&plain)
    }

    public mutating func write(_ plain: StaticString) { pending.writeStaticString(plain) }

    public mutating func write(_ plain: String) { pending.writeString(plain) }

    public mutating func write(_ plain: [UInt8]) { pending.writeBytes(plain) }

    public mutating func write(_ fragment: DeflateFragment) {
        flushPending()
        append(fragment)
    }

    /// The whole gzip member.
    public consuming func finish() -> ByteBuffer {
        flushPending()
        // A final fixed-Huffman block holding only its end code: BFINAL 1, BTYPE 01, code 0000000.
        output.writeBytes([0x03, 0x00])
        output.writeInteger(crc, endianness: .little)
        output.writeInteger(UInt32(truncatingIfNeeded: length), endianness: .little)
        return output
    }

    private mutating func flushPending() {
        guard pending.readableBytes > 0 else { return }
        append(
            pending.readableBytes <= Self.storedUpTo
                ? DeflateFragment(storing: pending) : DeflateFragment(compressing: pending, level: 5))
        pending.clear()
    }

    private mutating func append(_ fragment: DeflateFragment) {
        var deflated = fragment.deflated
        output.writeBuffer(&deflated)
        crc = UInt32(truncatingIfNeeded: crc32_combine(uLong(crc), uLong(fragment.crc), off_t(fragment.length)))
        length += UInt64(fragment.length)
    }
}
