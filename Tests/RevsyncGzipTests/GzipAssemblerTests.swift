import NIOCore
import RevsyncGzip
import RevsyncLink
import Testing

@Suite struct GzipAssemblerTests {
    /// Change-set-like JSON of varying size, some of it incompressible.
    static func piece(_ index: Int, size: Int) -> ByteBuffer {
        var generator = SplitMix64(seed: UInt64(index))
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
        // It ends where its last block ends: the bits of the last byte above it are zero, and
        // no empty stored block of a sync flush follows.
        #expect((1...8).contains(fragment.lastBits))
        let last = fragment.deflated.getInteger(at: fragment.deflated.readableBytes - 1, as: UInt8.self)!
        #expect(fragment.lastBits == 8 || last >> fragment.lastBits == 0)
        #expect(fragment.deflated.getBytes(at: fragment.deflated.readableBytes - 4, length: 4) != [0x00, 0x00, 0xff, 0xff])
    }

    /// Bytes no compressor can shrink: zlib stores them.
    static func noise(_ count: Int, seed: UInt64) -> ByteBuffer {
        var generator = SplitMix64(seed: seed)
        return ByteBuffer(bytes: (0..<count).map { _ in UInt8(truncatingIfNeeded: generator.next()) })
    }

    @Test func fragmentsJoinAtEveryBitOffsetAndStoredBlocksStartOnAByte() throws {
        let text = Self.piece(5, size: 700)
        let stored = DeflateFragment(compressing: Self.noise(300, seed: 1))
        // Text, then noise zlib stores after compressed text: the stored block sits inside.
        var mixed = Self.piece(6, size: 600)
        mixed.writeImmutableBuffer(Self.noise(20_000, seed: 2))
        let inside = DeflateFragment(compressing: mixed, level: 1)
        #expect(!DeflateFragment(compressing: text).startsOnByte)
        #expect(stored.startsOnByte && inside.startsOnByte)
        // A literal piece of n bytes of 144 or above takes 9n + 10 bits: the pieces before the
        // first fragment leave the stream at each of the eight offsets, the rest wherever.
        var offsets: Set<Int> = []
        for high in 0..<8 {
            let prefix = [UInt8](repeating: 0xe9, count: high)
            var assembler = GzipAssembler(capacity: 1024)
            var expected = ByteBuffer()
            for fragment in [DeflateFragment(compressing: text), stored, inside, DeflateFragment(compressing: text)] {
                assembler.write(prefix)
                expected.writeBytes(prefix)
                assembler.write(fragment)
                expected.writeImmutableBuffer(try fragment.inflated())
            }
            assembler.write("]")
            expected.writeString("]")
            #expect(try Gzip.inflate(assembler.finish(), maxSize: 1 << 20) == expected, "\(high) bytes before")
            offsets.insert((10 + 9 * high) % 8)
        }
        #expect(offsets.count == 8)
    }

    /// An answer of one change set costs little more than compressing it whole: no sync flush
    /// between pieces, the punctuation in fixed codes, the last piece the final block, and
    /// `maxRevision`'s digits a reference back to the change set's own `"revision":`. (Joined
    /// on byte boundaries, with the punctuation stored, this answer took 19 % more.)
    @Test func anAnswerOfOneFragmentIsWithinATenthOfCompressingItWhole() throws {
        // The bench's log: one note of padding, which compresses to a few bytes, so that the
        // answer's own bytes (its punctuation, the pieces' joins) weigh the most.
        let after = #","author_id":null,"player_id":null,"body":""# + String(repeating: "x", count: 800) + #"","pinned":false}}}}"#
        let body = ByteBuffer(string: #"{"conflict":false,"revision":12345,"types":["notes"],"notes":{"create":[1],"update":[],"delete":[],"#
            + #""attributes":{"1":{"revision":12345"# + after)
        // The change set's last `"revision":12345`, as the server marks it.
        let landmark = DeflateFragment.Landmark(text: Array(#""revision":12345"#.utf8), fromEnd: after.utf8.count)
        var whole = ByteBuffer(string: "{\"changeSets\":[")
        whole.writeImmutableBuffer(body)
        whole.writeString("],\"maxRevision\":12345}")
        var sizes: [Int] = []
        for mark in [nil, landmark] {
            var assembler = GzipAssembler(capacity: 512)
            assembler.write("{\"changeSets\":[" as StaticString)
            assembler.write(DeflateFragment(compressing: body).marked(mark))
            assembler.write("],\"maxRevision\":12345}" as StaticString)
            let joined = assembler.finish()
            #expect(try Gzip.inflate(joined, maxSize: 1 << 20) == whole)
            sizes.append(joined.readableBytes)
        }
        let alone = Gzip.deflate(whole).readableBytes
        #expect(sizes[1] < sizes[0], "the landmark saves bytes: \(sizes)")
        #expect(Double(sizes[1]) <= 1.1 * Double(alone), "\(sizes[1]) bytes against \(alone)")
    }

    @Test func plainBytesReferBackToLandmarksOnlyWithinTheWindow() throws {
        let text = Self.piece(8, size: 2_000)
        let mark = Array(text.getBytes(at: 40, length: 20)!)
        let fragment = DeflateFragment(compressing: text).marked(.init(text: mark, fromEnd: text.readableBytes - 60))
        for gap in [0, 10, 40_000] {
            var assembler = GzipAssembler(capacity: 1024)
            var expected = ByteBuffer()
            assembler.write(fragment)
            expected.writeImmutableBuffer(text)
            // A gap of 40,000 bytes puts the landmark beyond deflate's 32 KiB reach.
            let filler = DeflateFragment(compressing: Self.noise(gap, seed: 3))
            assembler.write(filler)
            expected.writeImmutableBuffer(try filler.inflated())
            // The landmark's middle, its whole, and a longer run than it holds.
            for piece in [Array(mark[3..<15]), mark, mark + mark] {
                assembler.write(piece)
                expected.writeBytes(piece)
                assembler.write(DeflateFragment(compressing: ByteBuffer(string: "-")))
                expected.writeString("-")
            }
            #expect(try Gzip.inflate(assembler.finish(), maxSize: 1 << 20) == expected, "gap \(gap)")
        }
    }

    @Test func aWrongChecksumIsCaughtByTheReader() {
        let plain = Self.piece(1, size: 300)
        let good = DeflateFragment(compressing: plain)
        var assembler = GzipAssembler(capacity: 512)
        assembler.write(DeflateFragment(deflated: good.deflated, crc: good.crc ^ 1, length: good.length))
        #expect(throws: Gzip.Failure.corrupt) { try Gzip.inflate(assembler.finish(), maxSize: 1 << 20) }
    }
}
