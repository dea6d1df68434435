import NIOCore
import RevsyncGzip

/// A change set, or an aligned run of them, compressed after the change set before it.
///
/// A fragment compressed alone cannot refer back, so every piece an answer is joined from
/// starts with nothing to match against: on change sets that look alike, the first one of
/// each piece costs ten times what it costs in the middle of a stream. Compressed with the
/// previous revision's public JSON as the dictionary, the piece refers back into it, and an
/// answer that has just sent that JSON can send the piece as is. It holds its own leading
/// comma. Where anything else comes before (the start of an answer, the device's own
/// change set in its author form, a missing value), the plain fragment is sent instead.
///
/// Both CRC-32s are kept so that a read never joins a piece after bytes it was not made
/// for: `dictionary` is the previous revision's public JSON, `tail` the piece's last change
/// set, which the next chained piece names as its dictionary.
package struct ChainedFragment: Sendable {
    package let fragment: DeflateFragment
    package let link: ChainLink

    /// The comma and `plain`, compressed after `previous`; `tail` is the CRC-32 of its last change set.
    init(_ plain: ByteBuffer, after previous: ByteBuffer, tail: UInt32, level: Int32 = DeflateFragment.commitLevel, with deflater: Deflater? = nil) {
        var joined = ByteBufferAllocator().buffer(capacity: plain.readableBytes + 1)
        joined.writeStaticString(",")
        joined.writeImmutableBuffer(plain)
        fragment = DeflateFragment(compressing: joined, level: level, dictionary: previous, with: deflater).marked(.lastRevision(in: joined))
        link = ChainLink(dictionary: DeflateFragment.crc(of: previous), tail: tail)
    }

    init(fragment: DeflateFragment, link: ChainLink) {
        self.fragment = fragment
        self.link = link
    }

    /// `[prefix][length: 4][CRC-32: 4][dictionary's CRC-32: 4][tail's CRC-32: 4][shape: 1][landmark][fragment]` (`writeFragment`)
    func value(prefix: ByteBuffer) -> ByteBuffer {
        var buffer = prefix
        buffer.writeFragment(fragment, link: link)
        return buffer
    }

    /// Reads what `value(prefix:)` wrote after its prefix; nil for bytes this server never wrote.
    package static func decode(_ value: inout ByteBuffer) -> ChainedFragment? {
        guard let (fragment, link) = value.readFragment(chained: true), let link, fragment.length > 0 else { return nil }
        return ChainedFragment(fragment: fragment, link: link)
    }
}

extension ByteBuffer {
    /// A compressed piece as every cached value holds it after its prefix: `[JSON length: 4]
    /// [CRC-32: 4]`, the two CRC-32s of `link` for a chained piece, `[shape: 1]`, the landmark
    /// if there is one, then the fragment. The shape's low three bits are the unused bits of
    /// the fragment's last byte (8 − `lastBits`), bit 3 is set when it must start on a byte
    /// (`startsOnByte`), and bit 4 when a landmark follows: `[bytes from the end: 4][count: 1][text]`.
    mutating func writeFragment(_ fragment: DeflateFragment, link: ChainLink? = nil) {
        reserveCapacity(minimumWritableBytes: 17 + (fragment.landmark.map { 5 + $0.text.count } ?? 0) + fragment.deflated.readableBytes)
        writeInteger(UInt32(truncatingIfNeeded: fragment.length))
        writeInteger(fragment.crc)
        if let link {
            writeInteger(link.dictionary)
            writeInteger(link.tail)
        }
        let landmark = fragment.landmark.flatMap { $0.text.count <= 255 ? $0 : nil }
        writeInteger(UInt8(8 - fragment.lastBits) | (fragment.startsOnByte ? 0b1000 : 0) | (landmark != nil ? 0b1_0000 : 0))
        if let landmark {
            writeInteger(UInt32(truncatingIfNeeded: landmark.fromEnd))
            writeInteger(UInt8(landmark.text.count))
            writeBytes(landmark.text)
        }
        writeImmutableBuffer(fragment.deflated)
    }

    /// Reads what `writeFragment` wrote: the rest of the buffer is the fragment. Nil when too short or not that layout.
    package mutating func readFragment(chained: Bool) -> (fragment: DeflateFragment, link: ChainLink?)? {
        guard let length = readInteger(as: UInt32.self), let crc = readInteger(as: UInt32.self) else { return nil }
        var link: ChainLink?
        if chained {
            guard let dictionary = readInteger(as: UInt32.self), let tail = readInteger(as: UInt32.self) else { return nil }
            link = ChainLink(dictionary: dictionary, tail: tail)
        }
        guard let shape = readInteger(as: UInt8.self), shape & 0b1110_0000 == 0 else { return nil }
        var landmark: DeflateFragment.Landmark?
        if shape & 0b1_0000 != 0 {
            guard let fromEnd = readInteger(as: UInt32.self), let count = readInteger(as: UInt8.self),
                let text = readBytes(length: Int(count)), Int(fromEnd) + text.count <= Int(length)
            else { return nil }
            landmark = DeflateFragment.Landmark(text: text, fromEnd: Int(fromEnd))
        }
        guard let deflated = readSlice(length: readableBytes), deflated.readableBytes > 0 || shape & 0b111 == 0 else { return nil }
        let fragment = DeflateFragment(deflated: deflated, crc: crc, length: Int(length), lastBits: 8 - Int(shape & 0b111),
            startsOnByte: shape & 0b1000 != 0)
        return (fragment.marked(landmark), link)
    }
}

extension DeflateFragment {
    /// What `writeFragment` writes for it without a link.
    var cachedBytes: Int { 9 + (landmark.map { 5 + $0.text.count } ?? 0) + deflated.readableBytes }
}

extension DeflateFragment.Landmark {
    /// The last `"revision":<digits>` in `plain`, which an answer's closing `"maxRevision":<r>`
    /// repeats when it ends with that change set; nil when there is none.
    static func lastRevision(in plain: ByteBuffer) -> Self? {
        let key = Array("\"revision\":".utf8)
        return plain.withUnsafeReadableBytes { bytes -> Self? in
            var start = bytes.count - key.count
            while start >= 0 {
                if bytes[start] == key[0], bytes[start..<(start + key.count)].elementsEqual(key) {
                    var end = start + key.count
                    while end < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[end]) { end += 1 }
                    guard end > start + key.count else { return nil }
                    return Self(text: Array(bytes[start..<end]), fromEnd: bytes.count - end)
                }
                start -= 1
            }
            return nil
        }
    }
}

/// Which change set a chained piece must follow, and which one it ends with (CRC-32s of their public JSON).
package struct ChainLink: Sendable, Hashable {
    package let dictionary: UInt32
    package let tail: UInt32
}
