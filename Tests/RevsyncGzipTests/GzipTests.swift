import NIOCore
import RevsyncGzip
import Testing

@Suite struct GzipTests {
    let text = String(repeating: #"{"maxRevision":1,"changeSets":[]}"#, count: 200)
    var compressed: [UInt8] { Array(Gzip.deflate(ByteBuffer(string: text)).readableBytesView) }

    func inflate(_ bytes: [UInt8], maxSize: Int = 1 << 20) throws(Gzip.Failure) -> String {
        String(buffer: try Gzip.inflate(ByteBuffer(bytes: bytes), maxSize: maxSize))
    }

    @Test func aBodyRoundTripsAsOneSmallGzipMember() throws {
        #expect(compressed.prefix(2) == [0x1f, 0x8b])
        #expect(compressed.count < text.utf8.count / 10)
        #expect(try inflate(compressed) == text)
        #expect(try inflate(Array(Gzip.deflate(ByteBuffer()).readableBytesView)) == "")
    }

    @Test func aTruncatedBodyIsRefusedWhereverItIsCut() {
        for kept in [compressed.count - 1, compressed.count - 8, compressed.count / 2, 10] {
            #expect(throws: Gzip.Failure.corrupt, "cut to \(kept) bytes") { try inflate(Array(compressed.prefix(kept))) }
        }
    }

    @Test func bytesAfterTheEndOfTheStreamAreRefused() {
        #expect(throws: Gzip.Failure.corrupt) { try inflate(compressed + [0]) }
        #expect(throws: Gzip.Failure.corrupt) { try inflate(compressed + Array("{}".utf8)) }
        #expect(throws: Gzip.Failure.corrupt, "a second member") { try inflate(compressed + compressed) }
    }

    @Test func outputBeyondTheLimitIsRefusedAndTheLimitItselfPasses() throws {
        #expect(throws: Gzip.Failure.tooLarge) { try inflate(compressed, maxSize: 100) }
        #expect(throws: Gzip.Failure.tooLarge) { try inflate(compressed, maxSize: text.utf8.count - 1) }
        #expect(try inflate(compressed, maxSize: text.utf8.count) == text)
    }

    @Test func bytesThatAreNotGzipAreRefused() {
        #expect(throws: Gzip.Failure.corrupt) { try inflate(Array(text.utf8)) }
        #expect(throws: Gzip.Failure.corrupt) { try inflate([]) }
    }

    @Test func aStreamedMemberInflatesLikeAWholeOne() throws {
        let stream = try GzipStream()
        var chunks: [ByteBuffer] = []
        for part in text.split(separator: ",") { chunks += try stream.compress(ByteBuffer(string: part + ",")) }
        chunks += try stream.finish()
        let bytes = chunks.flatMap { Array($0.readableBytesView) }
        #expect(try inflate(bytes) == text.split(separator: ",").map { $0 + "," }.joined())
    }
}
