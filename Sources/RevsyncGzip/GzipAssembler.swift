import CZlib
import NIOCore

/// Builds one gzip member from fragments compressed earlier and plain bytes between them
/// (the JSON punctuation of a response), without compressing the fragments again.
///
/// The body is the gzip header, the fragments and the plain pieces laid end to end as one
/// deflate stream, the last block marked final, and a trailer whose CRC-32 is combined from
/// the pieces' (`crc32_combine`). It is always a single member: several members would be
/// valid gzip, but curl, AsyncHTTPClient and URLSession on Linux stop after the first, and
/// browsers silently truncate.
///
/// Pieces are joined at the bit where the one before ended (`DeflateFragment.lastBits`), so
/// a fragment that does not start on a byte is shifted while it is copied. Short plain
/// pieces become a block of fixed Huffman codes written here, 8 bits a character plus 10,
/// and the last one is the final block; where they repeat a fragment's landmark
/// (`DeflateFragment.Landmark`) they refer back to it instead.
public struct GzipAssembler {
    private var output: ByteBuffer
    /// Plain bytes written since the last fragment, encoded together when the next fragment comes.
    private var pending: ByteBuffer
    /// Bits of the stream not yet in `output`: the low `bitCount` (0…7 between pieces).
    private var bits: UInt64 = 0
    private var bitCount = 0
    private var crc: UInt32 = 0
    private var length: UInt64 = 0
    /// The landmarks of the last fragments: their bytes and where those end in the uncompressed stream.
    private var landmarks: [(text: [UInt8], end: UInt64)] = []
    /// Plain pieces up to this size get fixed Huffman codes here; longer ones go through zlib,
    /// whose dynamic codes pay for their own table only on more text than punctuation.
    static let literalsUpTo = 256

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
        flushPending(final: false)
        append(fragment)
    }

    /// The whole gzip member.
    public consuming func finish() -> ByteBuffer {
        flushPending(final: true)
        alignToByte()
        output.writeInteger(crc, endianness: .little)
        output.writeInteger(UInt32(truncatingIfNeeded: length), endianness: .little)
        return output
    }

    /// Encodes the plain bytes written since the last fragment; with `final`, as the stream's
    /// final block (an empty one when there are none).
    private mutating func flushPending(final: Bool) {
        if pending.readableBytes > Self.literalsUpTo {
            append(DeflateFragment(compressing: pending, level: 5))
            pending.clear()
        }
        guard pending.readableBytes > 0 || final else { return }
        writeLiterals(pending, final: final)
        crc = UInt32(truncatingIfNeeded: crc32_combine(uLong(crc), uLong(DeflateFragment.crc(of: pending)), off_t(pending.readableBytes)))
        length += UInt64(pending.readableBytes)
        pending.clear()
    }

    /// One block of fixed Huffman codes (RFC 1951, 3.2.6) holding `plain`: literals, and
    /// back-references wherever at least four bytes repeat a landmark.
    private mutating func writeLiterals(_ plain: ByteBuffer, final: Bool) {
        // BFINAL, then BTYPE 01 (fixed codes), least significant bit first.
        writeBits(final ? 0b011 : 0b010, count: 3)
        let table = FixedLiteralCodes.table
        let bytes = Array(plain.readableBytesView)
        var index = 0
        while index < bytes.count {
            if let match = longestMatch(in: bytes, at: index) {
                writeMatch(length: match.length, distance: match.distance)
                index += match.length
            } else {
                let code = table[Int(bytes[index])]
                writeBits(UInt64(code.bits), count: Int(code.count))
                index += 1
            }
        }
        // End of block: code 256, seven zero bits.
        writeBits(0, count: 7)
    }

    /// The longest run of `bytes` from `index` on that a landmark holds, within deflate's 32 KiB reach.
    private func longestMatch(in bytes: [UInt8], at index: Int) -> (length: Int, distance: Int)? {
        let position = length + UInt64(index)
        var best: (length: Int, distance: Int)?
        for landmark in landmarks {
            let start = landmark.end - UInt64(landmark.text.count)
            for offset in landmark.text.indices {
                var count = 0
                while offset + count < landmark.text.count, index + count < bytes.count, count < 258,
                    landmark.text[offset + count] == bytes[index + count]
                {
                    count += 1
                }
                let distance = position - (start + UInt64(offset))
                // Four bytes at least: a reference costs about as much as three literals.
                if count >= 4, distance <= 32_768, count > (best?.length ?? 0) { best = (count, Int(distance)) }
            }
        }
        return best
    }

    /// A length and distance pair in fixed codes: the length's code and extra bits, then the distance's.
    private mutating func writeMatch(length: Int, distance: Int) {
        let lengthIndex = FixedLiteralCodes.lengthBases.lastIndex { $0 <= length }!
        let symbol = 257 + lengthIndex
        // Symbols 256…279 take 7 bits (0000000 + n), 280…287 take 8 (11000000 + n − 280).
        let (code, count) = symbol < 280 ? (symbol - 256, 7) : (0xc0 + symbol - 280, 8)
        writeBits(UInt64(FixedLiteralCodes.reversed(code, count: count)), count: count)
        writeBits(UInt64(length - FixedLiteralCodes.lengthBases[lengthIndex]), count: FixedLiteralCodes.lengthExtraBits[lengthIndex])
        let distanceIndex = FixedLiteralCodes.distanceBases.lastIndex { $0 <= distance }!
        writeBits(UInt64(FixedLiteralCodes.reversed(distanceIndex, count: 5)), count: 5)
        writeBits(UInt64(distance - FixedLiteralCodes.distanceBases[distanceIndex]), count: FixedLiteralCodes.distanceExtraBits[distanceIndex])
    }

    private mutating func append(_ fragment: DeflateFragment) {
        crc = UInt32(truncatingIfNeeded: crc32_combine(uLong(crc), uLong(fragment.crc), off_t(fragment.length)))
        length += UInt64(fragment.length)
        if let landmark = fragment.landmark, landmark.fromEnd + landmark.text.count <= fragment.length {
            landmarks.append((landmark.text, length - UInt64(landmark.fromEnd)))
            if landmarks.count > 4 { landmarks.removeFirst() }
        }
        let count = fragment.deflated.readableBytes
        guard count > 0 else { return }
        if fragment.startsOnByte && bitCount > 0 {
            // An empty stored block: its header, padding to the byte, LEN 0 and its complement.
            writeBits(0, count: 3)
            alignToByte()
            output.writeBytes([0x00, 0x00, 0xff, 0xff])
        }
        let whole = fragment.lastBits == 8 ? count : count - 1
        if bitCount == 0 {
            output.writeImmutableBuffer(fragment.deflated.getSlice(at: fragment.deflated.readerIndex, length: whole)!)
        } else {
            appendShifted(fragment.deflated, count: whole)
        }
        if fragment.lastBits < 8 {
            let last = fragment.deflated.getInteger(at: fragment.deflated.readerIndex + count - 1, as: UInt8.self)!
            writeBits(UInt64(last) & ((1 << UInt64(fragment.lastBits)) - 1), count: fragment.lastBits)
        }
    }

    /// Copies the first `count` bytes of `deflated` after the `bitCount` bits held, eight bytes at a time.
    private mutating func appendShifted(_ deflated: ByteBuffer, count: Int) {
        let shift = UInt64(bitCount)
        var carry = bits
        deflated.withUnsafeReadableBytes { source in
            output.writeWithUnsafeMutableBytes(minimumWritableBytes: count) { target in
                var index = 0
                while index + 8 <= count {
                    let word = UInt64(littleEndian: source.loadUnaligned(fromByteOffset: index, as: UInt64.self))
                    target.storeBytes(of: (carry | word << shift).littleEndian, toByteOffset: index, as: UInt64.self)
                    carry = word >> (64 - shift)
                    index += 8
                }
                while index < count {
                    let joined = carry | UInt64(source[index]) << shift
                    target[index] = UInt8(truncatingIfNeeded: joined)
                    carry = joined >> 8
                    index += 1
                }
                return count
            }
        }
        bits = carry
    }

    /// Appends the low `count` bits of `value` (at most 32) to the stream.
    private mutating func writeBits(_ value: UInt64, count: Int) {
        bits |= value << UInt64(bitCount)
        bitCount += count
        while bitCount >= 8 {
            output.writeInteger(UInt8(truncatingIfNeeded: bits))
            bits >>= 8
            bitCount -= 8
        }
    }

    /// Pads the stream with zero bits to the next byte.
    private mutating func alignToByte() {
        if bitCount > 0 { writeBits(0, count: 8 - bitCount) }
    }
}

/// Deflate's fixed Huffman codes (RFC 1951, 3.2.5 and 3.2.6), bit-reversed for a stream
/// written least significant bit first.
enum FixedLiteralCodes {
    /// Every literal byte: 0…143 take 8 bits (00110000 + value), 144…255 take 9 (110010000 + value − 144).
    static let table: [(bits: UInt16, count: UInt8)] = (0...255).map { byte in
        let (code, count) = byte < 144 ? (0x30 + byte, 8) : (0x190 + byte - 144, 9)
        return (UInt16(reversed(code, count: count)), UInt8(count))
    }

    /// The shortest length of each length symbol 257…285, and its extra bits.
    static let lengthBases = [3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 17, 19, 23, 27, 31, 35, 43, 51, 59, 67, 83, 99, 115, 131, 163, 195, 227, 258]
    static let lengthExtraBits = [0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0]
    /// The shortest distance of each distance code 0…29 (five bits each), and its extra bits.
    static let distanceBases = [1, 2, 3, 4, 5, 7, 9, 13, 17, 25, 33, 49, 65, 97, 129, 193, 257, 385, 513, 769, 1025, 1537, 2049, 3073,
        4097, 6145, 8193, 12289, 16385, 24577]
    static let distanceExtraBits = [0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13]

    /// `code`'s low `count` bits in reverse order: Huffman codes are sent most significant bit first.
    static func reversed(_ code: Int, count: Int) -> Int {
        var reversed = 0
        for bit in 0..<count where code & (1 << bit) != 0 { reversed |= 1 << (count - 1 - bit) }
        return reversed
    }
}
