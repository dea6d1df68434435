import Testing
@testable import RevsyncServer

/// The one `Range` a resuming download sends, and everything else answered whole.
@Suite struct ByteRangeTests {
    @Test func singleRangesOfBytes() {
        #expect(ByteRange.parse("bytes=100-", size: 1000) == .part(100...999))
        #expect(ByteRange.parse("bytes=0-0", size: 1000) == .part(0...0))
        #expect(ByteRange.parse("bytes=10-19", size: 1000) == .part(10...19))
        #expect(ByteRange.parse("bytes=990-5000", size: 1000) == .part(990...999), "an end past the file is cut to it")
        #expect(ByteRange.parse("bytes=-10", size: 1000) == .part(990...999), "the last ten bytes")
        #expect(ByteRange.parse("bytes=-5000", size: 1000) == .part(0...999))
        #expect(ByteRange.parse(" Bytes=5- ", size: 1000) == .part(5...999))
    }

    @Test func rangesPastTheEndAreUnsatisfiable() {
        #expect(ByteRange.parse("bytes=1000-", size: 1000) == .unsatisfiable)
        #expect(ByteRange.parse("bytes=2000-3000", size: 1000) == .unsatisfiable)
        #expect(ByteRange.parse("bytes=-0", size: 1000) == .unsatisfiable)
        #expect(ByteRange.parse("bytes=0-", size: 0) == .unsatisfiable)
    }

    @Test func anythingElseIsTheWholeBody() {
        for header in [nil, "", "bytes=", "bytes=a-b", "bytes=5-1", "bytes=0-1,5-6", "items=0-5", "bytes=-", "bytes=--5", "bytes=-1-2"] {
            #expect(ByteRange.parse(header, size: 1000) == .whole, "\(header ?? "nil")")
        }
    }
}
