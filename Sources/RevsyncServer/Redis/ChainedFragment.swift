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
    /// A compressed piece as every cached value holds it after its prefix:
    /// `[JSON length: 4][CRC-32: 4]`, the two CRC-32s of `link` for a chained piece, then the fragment.
    mutating func writeFragment(_ fragment: DeflateFragment, link: ChainLink? = nil) {
        reserveCapacity(minimumWritableBytes: 16 + fragment.deflated.readableBytes)
        writeInteger(UInt32(truncatingIfNeeded: fragment.length))
        writeInteger(fragment.crc)
        if let link {
            writeInteger(link.dictionary)
            writeInteger(link.tail)
        }
        writeImmutableBuffer(fragment.deflated)
    }

    /// Reads what `writeFragment` wrote: the rest of the buffer is the fragment. Nil when too short.
    package mutating func readFragment(chained: Bool) -> (fragment: DeflateFragment, link: ChainLink?)? {
        guard let length = readInteger(as: UInt32.self), let crc = readInteger(as: UInt32.self) else { return nil }
        var link: ChainLink?
        if chained {
            guard let dictionary = readInteger(as: UInt32.self), let tail = readInteger(as: UInt32.self) else { return nil }
            link = ChainLink(dictionary: dictionary, tail: tail)
        }
        let fragment = DeflateFragment(deflated: readSlice(length: readableBytes) ?? ByteBuffer(), crc: crc, length: Int(length))
        return (fragment, link)
    }
}

/// Which change set a chained piece must follow, and which one it ends with (CRC-32s of their public JSON).
package struct ChainLink: Sendable, Hashable {
    package let dictionary: UInt32
    package let tail: UInt32
}
