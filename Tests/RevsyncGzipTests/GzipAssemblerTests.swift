import NIOCore
import RevsyncGzip
import Testing

@Suite struct GzipAssemblerTests {
    /// Change-set-like JSON of varying size, some of it incompressible.
    static func piece(_ index: Int, size: Int) -> ByteBuffer {
        var generator = SplitMix(seed: UInt64(index))
        let noise = (0..<size / 3).map { _ in Character(UnicodeScalar(UInt8(33 + generator.next() % 90))) }
        return ByteBuffer(string: #"{"revision":\#(index),"notes":{"update":[\#(index)],"body":""# + String(noise) + String(repeating: "ab", count: size / 3) + "\"}}")
    }

    @Test func fragmentsAndPlainPiecesJoinIntoOneMemberOfExactlyTheirBytes() throws {
        for count in [0, 1, 2, 17, 300] {
            var assembler = GzipAssembler(capacity: 1024)
            var expected = ByteBuffer(string: "{\"changeSets\":[")
            assembler.write("{\"changeSets\":[" as StaticString)
            for index in 0..<count {
                let body = Self.piece(index, size: [0, 10, 700, 5_000, 70_000][index % 5])
                if index > 0 {
                    assembler.write(",")
                    expected.writeString(",")
                }
                // Every third piece plain (an acknowledgement, a corrective set), the rest compressed apart.
                if index % 3 == 2 { assembler.write(body) } else { assembler.write(DeflateFragment(compressing: body)) }
                var copy = body
                expected.writeBuffer(&copy)
            }
            assembler.write("],\"maxRevision\":9}")
            expected.writeString("],\"maxRevision\":9}")
            let gzip = assembler.finish()
            // Strict: the whole stream must end in one member, with the right CRC-32 and length.
            #expect(try Gzip.inflate(gzip, maxSize: 1 << 24) == expected, "\(count) pieces")
            #expect(gzip.getBytes(at: 0, length: 3) == [0x1f, 0x8b, 0x08])
        }
    }

    @Test func aFragmentCompressedAfterTheBytesBeforeItJoinsRightAfterThemAndIsSmaller() throws {
        for size in [10, 700, 5_000, 70_000] {
            let first = Self.piece(1, size: size), second = Self.piece(1, size: size)
            var comma = ByteBuffer(string: ",")
            comma.writeImmutableBuffer(second)
            let alone = DeflateFragment(compressing: comma)
            let chained = DeflateFragment(compressing: comma, dictionary: first)
            // The same bytes again: alone, the second has nothing to refer back to.
            if size == 700 || size == 5_000 { #expect(chained.deflated.readableBytes * 4 < alone.deflated.readableBytes, "\(size) bytes") }
            var assembler = GzipAssembler(capacity: 1024)
            assembler.write("[" as StaticString)
            assembler.write(DeflateFragment(compressing: first))
            assembler.write(chained)
            assembler.write("]" as StaticString)
            var expected = ByteBuffer(string: "[")
            expected.writeImmutableBuffer(first)
            expected.writeImmutableBuffer(comma)
            expected.writeString("]")
            #expect(try Gzip.inflate(assembler.finish(), maxSize: 1 << 24) == expected, "\(size) bytes")
            // Inflated on its own, it needs the bytes before it, and only their window.
            var before = ByteBuffer(string: String(repeating: "z", count: 40_000))
            before.writeImmutableBuffer(first)
            #expect(try chained.inflated(after: before) == comma, "\(size) bytes")
            #expect(try alone.inflated() == comma)
        }
    }

    @Test func storedPiecesOfAnySizeDecode() throws {
        for size in [0, 1, 65_535, 65_536, 200_000] {
            let plain = ByteBuffer(bytes: (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 7) })
            var assembler = GzipAssembler(capacity: size)
            assembler.write(DeflateFragment(storing: plain))
            #expect(try Gzip.inflate(assembler.finish(), maxSize: 1 << 20) == plain, "\(size) bytes stored")
        }
    }

    @Test func aFragmentCarriesTheLengthAndChecksumOfItsBytes() {
        let plain = Self.piece(3, size: 900)
        let fragment = DeflateFragment(compressing: plain)
        #expect(fragment.length == plain.readableBytes)
        #expect(fragment.crc == DeflateFragment(storing: plain).crc)
        #expect(fragment.deflated.readableBytes < plain.readableBytes)
        // A sync flush ends the fragment on a byte boundary with an empty stored block.
        #expect(fragment.deflated.getBytes(at: fragment.deflated.readableBytes - 4, length: 4) == [0x00, 0x00, 0xff, 0xff])
    }

    @Test func aWrongChecksumIsCaughtByTheReader() {
        let plain = Self.piece(1, size: 300)
        let good = DeflateFragment(compressing: plain)
        var assembler = GzipAssembler(capacity: 512)
        assembler.write(DeflateFragment(deflated: good.deflated, crc: good.crc ^ 1, length: good.length))
        #expect(throws: Gzip.Failure.corrupt) { try Gzip.inflate(assembler.finish(), maxSize: 1 << 20) }
    }
}

/// A small deterministic generator, so that failures reproduce.
struct SplitMix {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
