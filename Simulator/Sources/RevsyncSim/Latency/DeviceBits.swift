/// A set of device indexes as bits: an awaited revision of a thousand-device run
/// costs 128 bytes, not a hash set's kilobytes.
struct DeviceBits: Sendable, Equatable {
    private var words: [UInt64] = []

    var isEmpty: Bool { words.allSatisfy { $0 == 0 } }

    var count: Int { words.reduce(0) { $0 + $1.nonzeroBitCount } }

    func contains(_ index: Int) -> Bool {
        let (word, bit) = index.quotientAndRemainder(dividingBy: 64)
        return word < words.count && words[word] & (1 << UInt64(bit)) != 0
    }

    mutating func insert(_ index: Int) {
        let (word, bit) = index.quotientAndRemainder(dividingBy: 64)
        if word >= words.count { words += Array(repeating: 0, count: word + 1 - words.count) }
        words[word] |= 1 << UInt64(bit)
    }

    /// Removes `index`; returns whether it was there.
    @discardableResult
    mutating func remove(_ index: Int) -> Bool {
        guard contains(index) else { return false }
        let (word, bit) = index.quotientAndRemainder(dividingBy: 64)
        words[word] &= ~(1 << UInt64(bit))
        return true
    }
}
