import NIOCore
import RevsyncGzip
import Testing

/// A gzip member inflated as it arrives, in pieces of any size, as strictly as `Gzip.inflate`.
@Suite struct GunzipStreamTests {
    let plain: [UInt8] = (0..<300_000).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ ($0 >> 7)) }
    var compressed: [UInt8] { Array(Gzip.deflate(ByteBuffer(bytes: plain)).readableBytesView) }

    func inflate(_ bytes: [UInt8], piece: Int) throws -> [UInt8] {
        let stream = try GunzipStream()
        var out: [UInt8] = []
        var start = 0
        while start < bytes.count {
            let end = min(bytes.count, start + piece)
            try stream.inflate(ByteBuffer(bytes: bytes[start..<end])) { out += $0.readableBytesView }
            start = end
        }
        try stream.finish()
        return out
    }

    @Test func piecesOfAnySizeInflateToTheWhole() throws {
        for piece in [1, 7, 4096, 65_536, 1 << 20] {
            #expect(try inflate(compressed, piece: piece) == plain, "pieces of \(piece)")
        }
    }

    @Test func aMemberCutShortIsRefusedAtTheEnd() {
        let bytes = compressed
        for cut in [10, bytes.count / 2, bytes.count - 1] {
            #expect(throws: (any Error).self, "cut at \(cut)") { _ = try inflate(Array(bytes.prefix(cut)), piece: 4096) }
        }
    }

    @Test func bytesAfterTheMemberOrDamagedBytesAreRefused() {
        #expect(throws: (any Error).self) { _ = try inflate(compressed + [1, 2, 3], piece: 4096) }
        var damaged = compressed
        damaged[damaged.count / 2] ^= 0xFF
        #expect(throws: (any Error).self) { _ = try inflate(damaged, piece: 4096) }
    }
}
