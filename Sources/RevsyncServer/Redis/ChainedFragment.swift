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
    init(_ plain: ByteBuffer, after previous: ByteBuffer, tail: UInt32, level: Int32 = DeflateFragment.commitLevel) {
        var joined = ByteBufferAllocator().buffer(capacity: plain.readableBytes + 1)
        joined.writeStaticString(",")
        joined.writeImmutableBuffer(plain)
        fragment = DeflateFragment(compressing: joined, level: level, dictionary: previous)
        link = ChainLink(dictionary: DeflateFragment.crc(of: previous), tail: tail)
    }

    init(fragment: DeflateFragment, link: ChainLink) {
        self.fragment = fragment
        self.link = link
    }

    /// `[prefix][length: 4][CRC-32: 4][dictionary's CRC-32: 4][tail's CRC-32: 4][fragment]`
    func value(prefix: ByteBuffer) -> ByteBuffer {
        var buffer = ByteBufferAllocator().buffer(capacity: prefix.readableBytes + 16 + fragment.deflated.readableBytes)
        buffer.writeImmutableBuffer(prefix)
        buffer.writeInteger(UInt32(truncatingIfNeeded: fragment.length))
        buffer.writeInteger(fragment.crc)
        buffer.writeInteger(link.dictionary)
        buffer.writeInteger(link.tail)
        buffer.writeImmutableBuffer(fragment.deflated)
        return buffer
    }

    /// Reads what `value(prefix:)` wrote after its prefix; nil for bytes this server never wrote.
    package static func decode(_ value: inout ByteBuffer) -> ChainedFragment? {
        guard let length = value.readInteger(as: UInt32.self), let crc = value.readInteger(as: UInt32.self),
            let dictionary = value.readInteger(as: UInt32.self), let tail = value.readInteger(as: UInt32.self), length > 0
        else { return nil }
        return ChainedFragment(fragment: DeflateFragment(deflated: value, crc: crc, length: Int(length)), link: ChainLink(dictionary: dictionary, tail: tail))
    }
}

/// Which change set a chained piece must follow, and which one it ends with (CRC-32s of their public JSON).
package struct ChainLink: Sendable, Hashable {
    package let dictionary: UInt32
    package let tail: UInt32
}
