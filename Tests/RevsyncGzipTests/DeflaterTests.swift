import NIOCore
import RevsyncGzip
import Testing

/// One `Deflater` shared by many fragments, as a batch's commit compresses them.
@Suite struct DeflaterTests {
    /// Every fragment made with a shared deflater, whatever came before it on that deflater
    /// (another level, a dictionary, a stored block), is the fragment a fresh zlib makes.
    @Test func aSharedDeflaterMakesTheSameFragmentsAsAFreshOneEachTime() throws {
        let shared = Deflater()
        let previous = GzipAssemblerTests.piece(1, size: 300)
        let cases: [(plain: ByteBuffer, level: Int32, dictionary: ByteBuffer?)] = [
            (GzipAssemblerTests.piece(2, size: 180), 9, nil),
            (GzipAssemblerTests.piece(3, size: 180), 9, previous),
            (GzipAssemblerTests.noise(2_000, seed: 7), 9, nil),
            (GzipAssemblerTests.piece(4, size: 5_000), 6, nil),
            (GzipAssemblerTests.piece(5, size: 180), 6, previous),
            (GzipAssemblerTests.piece(6, size: 180), 9, nil),
            (ByteBuffer(), 9, nil),
        ]
        for (plain, level, dictionary) in cases {
            let reused = DeflateFragment(compressing: plain, level: level, dictionary: dictionary, with: shared)
            let fresh = DeflateFragment(compressing: plain, level: level, dictionary: dictionary)
            #expect(reused == fresh, "level \(level), \(plain.readableBytes) bytes, dictionary: \(dictionary != nil)")
            #expect(try reused.inflated(after: dictionary ?? ByteBuffer()) == plain)
        }
    }
}
