import NIOCore

/// The one field a write load generator needs from an answer, read without decoding the rest.
enum SyncAnswer {
    /// The answer's `maxRevision`: the server writes it after the change sets, as
    /// `…],"maxRevision":N}`, followed at most by `,"more":true` and `,"history":"<uuid>"`;
    /// the search runs back from the end.
    static func maxRevision(of answer: ByteBuffer) throws -> Int64 {
        let bytes = answer.readableBytesView
        let key = Array("\"maxRevision\":".utf8)
        guard bytes.count > key.count else { throw BenchError("an answer too short to hold maxRevision") }
        var index = bytes.endIndex - key.count
        while index >= bytes.startIndex {
            if bytes[index..<(index + key.count)].elementsEqual(key) {
                var value: Int64 = 0
                var digit = index + key.count
                while digit < bytes.endIndex, bytes[digit] >= UInt8(ascii: "0"), bytes[digit] <= UInt8(ascii: "9") {
                    value = value * 10 + Int64(bytes[digit] - UInt8(ascii: "0"))
                    digit += 1
                }
                guard digit > index + key.count else { break }
                return value
            }
            index -= 1
        }
        throw BenchError("no maxRevision in the answer: \(String(buffer: answer).suffix(200))")
    }
}
