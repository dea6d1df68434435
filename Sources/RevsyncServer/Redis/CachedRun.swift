import NIOCore
import RevsyncGzip

/// Aligned runs of consecutive change sets, compressed together in their public form.
///
/// A change set compressed alone cannot refer to its neighbours and carries its own Huffman
/// tables, so joined fragments come out two to three times the size of compressing the answer
/// whole. A run of 32 (about a deflate window of ~1 KB change sets) compresses almost as well
/// as the whole answer, and runs of 8 fill the edges of a range. Run `k` of size `n` holds
/// revisions `k·n + 1 … k·n + n`, joined by commas, in key `…:rb<n>:<k>`:
/// `[author count: 2 bytes][author ids: 8 bytes each][JSON length: 4][CRC-32: 4][shape: 1][landmark][fragment]`.
/// A device that wrote one of them gets the run's change sets one by one (its own in the
/// author's form). Key `…:rcb<n>:<k>` holds the same run compressed after revision `k·n`
/// (`ChainedFragment`), for an answer that has just sent that revision: the authors, then
/// `ChainedFragment`'s layout. A run is made by the batch that commits its last revision; if it is
/// missing (evicted, flushed, or its maker failed) the change sets go one by one.
package struct CachedRun: Sendable {
    /// Largest first: a range takes the longest runs that fit.
    static let sizes: [Int64] = [32, 8]

    /// What one key of a read stands for.
    package enum Span: Sendable, Hashable {
        case single(Int64)
        case run(size: Int64, index: Int64, first: Int64)
    }

    /// The keys a gzip read of `first … last` takes: the longest aligned runs that fit the range
    /// and hold none of `own`, single change sets around them.
    package static func cover(_ first: Int64, _ last: Int64, excluding own: Set<Int64> = []) -> [Span] {
        var spans: [Span] = []
        var number = first
        while number <= last {
            let size = sizes.first { size in
                (number - 1) % size == 0 && number + size - 1 <= last && !(number..<(number + size)).contains { own.contains($0) }
            }
            if let size {
                spans.append(.run(size: size, index: (number - 1) / size, first: number))
                number += size
            } else {
                spans.append(.single(number))
                number += 1
            }
        }
        return spans
    }

    package let authors: [Int64]
    package let fragment: DeflateFragment
    /// For a chained run (`rcb` keys): what it must follow, and its last change set.
    let link: ChainLink?

    /// The run of `size` that ends at `last`, when `last` ends one.
    static func ending(at last: Int64, size: Int64) -> Int64? {
        last % size == 0 ? last / size - 1 : nil
    }

    /// Runs are compressed at a per-request level: 32 change sets at level 9 cost the batch that makes them too much.
    static let level: Int32 = 6

    /// The public bodies of the run, in order, compressed together; after `previous` (the
    /// public JSON of the revision before the run) for the chained form.
    init(bodies: [(device: Int64, body: ByteBuffer)], after previous: ByteBuffer? = nil, with deflater: Deflater? = nil) {
        var joined = ByteBufferAllocator().buffer(capacity: bodies.reduce(0) { $0 + $1.body.readableBytes + 1 })
        for (index, entry) in bodies.enumerated() {
            if index > 0 { joined.writeStaticString(",") }
            joined.writeImmutableBuffer(entry.body)
        }
        authors = Array(Set(bodies.map(\.device))).sorted()
        if let previous, let last = bodies.last {
            let chained = ChainedFragment(joined, after: previous, tail: DeflateFragment.crc(of: last.body), level: Self.level, with: deflater)
            (fragment, link) = (chained.fragment, chained.link)
        } else {
            (fragment, link) = (DeflateFragment(compressing: joined, level: Self.level, with: deflater).marked(.lastRevision(in: joined)), nil)
        }
    }

    init(authors: [Int64], fragment: DeflateFragment, link: ChainLink? = nil) {
        self.authors = authors
        self.fragment = fragment
        self.link = link
    }

    package var value: ByteBuffer {
        var buffer = ByteBufferAllocator().buffer(capacity: 2 + 8 * authors.count + 16 + fragment.deflated.readableBytes)
        buffer.writeInteger(UInt16(authors.count))
        for author in authors { buffer.writeInteger(author) }
        buffer.writeFragment(fragment, link: link)
        return buffer
    }

    /// Nil for bytes this server never wrote. `chained`: the value of an `rc` key.
    package static func decode(_ value: ByteBuffer, chained: Bool = false) -> CachedRun? {
        var value = value
        guard let count = value.readInteger(as: UInt16.self) else { return nil }
        var authors: [Int64] = []
        for _ in 0..<count {
            guard let author = value.readInteger(as: Int64.self) else { return nil }
            authors.append(author)
        }
        guard let (fragment, link) = value.readFragment(chained: chained) else { return nil }
        return CachedRun(authors: authors, fragment: fragment, link: link)
    }
}
