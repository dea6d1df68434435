import NIOCore
import RevsyncLink
import Testing
@testable import RevsyncGzip

/// Whether a fragment holds a stored block (and so must start on a byte): read from the first
/// block's header for short input, which zlib makes one block, and walked by inflating for the rest.
@Suite struct StoredBlockTests {
    /// What walking every block says of `fragment`, compressed after `dictionary`.
    static func walked(_ fragment: DeflateFragment, dictionary: ByteBuffer?) -> Bool {
        fragment.deflated.withUnsafeReadableBytes { deflated in
            guard let dictionary else { return DeflateFragment.holdsStoredBlock(deflated, lastBits: fragment.lastBits, dictionary: nil) }
            return dictionary.withUnsafeReadableBytes { DeflateFragment.holdsStoredBlock(deflated, lastBits: fragment.lastBits, dictionary: $0) }
        }
    }

    /// Letters at random: compressible by their codes, but every byte a literal symbol.
    static func letters(_ count: Int, seed: UInt64) -> ByteBuffer {
        var generator = SplitMix64(seed: seed)
        return ByteBuffer(bytes: (0..<count).map { _ in UInt8(97 + generator.next() % 26) })
    }

    /// Short strings outside ASCII, which zlib often stores.
    static func accented(_ count: Int, seed: UInt64) -> ByteBuffer {
        var generator = SplitMix64(seed: seed)
        return ByteBuffer(string: String((0..<count).map { _ in Character(UnicodeScalar(UInt32(0xC0 + generator.next() % 0x1C0))!) }))
    }

    @Test func theFirstBlocksHeaderSaysWhatTheWalkSaysForShortInput() {
        var stored = 0, compressed = 0
        let sizes = [0, 1, 3, 12, 40, 200, 900, 4_000, 16_000, 16_382]
        for (index, size) in sizes.enumerated() {
            let inputs = [
                GzipAssemblerTests.piece(index, size: size), GzipAssemblerTests.noise(size, seed: UInt64(index)),
                Self.letters(size, seed: UInt64(index)), Self.accented(size / 2, seed: UInt64(index)),
            ]
            for input in inputs where input.readableBytes < Deflater.singleBlockInput {
                for level: Int32 in [1, 6, 9] {
                    for dictionary in [nil, GzipAssemblerTests.piece(index + 100, size: 300)] {
                        let fragment = DeflateFragment(compressing: input, level: level, dictionary: dictionary)
                        let walk = Self.walked(fragment, dictionary: dictionary)
                        #expect(fragment.startsOnByte == walk, "\(input.readableBytes) bytes at level \(level), dictionary \(dictionary != nil)")
                        if input.readableBytes > 0 { if walk { stored += 1 } else { compressed += 1 } }
                    }
                }
            }
        }
        // Both kinds were met, or the comparison proved nothing.
        #expect(stored > 10 && compressed > 10, "\(stored) stored, \(compressed) compressed")
    }

    /// As a commit compresses: one `Deflater` for change sets at the commit's level and runs at
    /// theirs, in turn (a level set again straight after each reset).
    @Test func aSharedDeflaterChangingLevelsAgreesWithTheWalk() {
        #expect(Deflater.endsBlocksAsZlib, "this machine's zlib is walked: the tests above prove nothing of the shortcut")
        let deflater = Deflater()
        var stored = 0
        for index in 0..<60 {
            let size = [5, 90, 700, 3_000, 16_382][index % 5]
            let input = index % 3 == 0 ? GzipAssemblerTests.noise(size, seed: UInt64(index)) : GzipAssemblerTests.piece(index, size: size)
            let dictionary = index % 2 == 0 ? GzipAssemblerTests.piece(index + 1, size: 400) : nil
            let level: Int32 = index % 2 == 0 ? DeflateFragment.commitLevel : 6
            let fragment = DeflateFragment(compressing: input, level: level, dictionary: dictionary, with: deflater)
            let walk = Self.walked(fragment, dictionary: dictionary)
            #expect(fragment.startsOnByte == walk, "\(index): \(size) bytes at level \(level)")
            #expect((try? fragment.inflated(after: dictionary ?? ByteBuffer())) == input, "\(index)")
            if walk { stored += 1 }
        }
        #expect(stored > 5)
    }

    /// Past the limit zlib ends blocks as its buffer fills: a stored block can follow a
    /// compressed one, which the first header does not show. Those are walked.
    @Test func longInputIsWalkedBecauseAStoredBlockCanFollowTheFirst() {
        var input = Self.letters(40_000, seed: 7)
        input.writeImmutableBuffer(GzipAssemblerTests.noise(40_000, seed: 8))
        let fragment = DeflateFragment(compressing: input, level: 6)
        #expect(!DeflateFragment.firstBlockIsStored(fragment.deflated))
        #expect(Self.walked(fragment, dictionary: nil))
        #expect(fragment.startsOnByte)
    }
}
