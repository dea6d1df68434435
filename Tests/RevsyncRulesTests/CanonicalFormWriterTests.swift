import Foundation
import RevsyncLink
import RevsyncWire
import Testing

@testable import RevsyncRules

/// The canonical bytes are stored (as seq digests): the writer must give exactly what
/// `JSONEncoder` with `.sortedKeys` gives, or a retry would stop matching its first sending.
@Suite struct CanonicalFormWriterTests {
    private func encoder(_ changeSet: ChangeSet) throws -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return Array(try encoder.encode(changeSet))
    }

    @Test func writesWhatTheEncoderWritesForRandomChangeSets() throws {
        var random = RandomChangeSets(seed: 20_261_125)
        var written = 0
        for _ in 0..<3_000 {
            let changeSet = random.changeSet()
            guard let bytes = CanonicalFormWriter.bytes(changeSet) else { continue }
            written += 1
            let expected = try encoder(changeSet)
            #expect(bytes == expected, "\(String(decoding: bytes, as: UTF8.self)) ≠ \(String(decoding: expected, as: UTF8.self))")
        }
        // Only those with a fraction or a reserved entity name are left to the encoder.
        #expect(written > 2_000)
    }

    /// Stored digests were made from these very bytes: a change here (or in a toolchain's
    /// encoder) would make every retry of an earlier change set look like another one.
    @Test func theBytesOfAKnownChangeSetStayTheSame() throws {
        var changeSet = ChangeSet(seq: 3, types: ["notes", "leagues"])
        changeSet.entities["notes"] = EntityChanges(update: [12], attributes: [12: ["body": "a/b \"c\"\n", "pinned": true, "author_id": 7]])
        changeSet.entities["leagues"] = EntityChanges(create: [-4], attributes: [-4: ["name": "Ünited", "founded": .null]])
        let schema = try Fixtures.defaultSchema()
        let text = String(decoding: ChangeSetCanonicalForm.bytes(changeSet, schema: schema, permanentIds: [:]), as: UTF8.self)
        #expect(text == #"{"leagues":{"attributes":{"-4":{"founded":null,"name":"Ünited"}},"create":[-4],"delete":[],"update":[]},"notes":{"attributes":{"12":{"author_id":7,"body":"a\/b \"c\"\n","pinned":true}},"create":[],"delete":[],"update":[12]},"types":["notes","leagues"]}"#)
    }

    @Test func leavesFractionsDuplicatesAndReservedNamesToTheEncoder() {
        var fraction = ChangeSet(types: ["notes"])
        fraction.entities["notes"] = EntityChanges(update: [1], attributes: [1: ["x": .double(1.5)]])
        #expect(CanonicalFormWriter.bytes(fraction) == nil)
        #expect(CanonicalFormWriter.bytes(ChangeSet(types: ["notes", "notes"])) == nil)
        #expect(CanonicalFormWriter.bytes(ChangeSet(types: ["types"])) == nil)
        #expect(CanonicalFormWriter.bytes(ChangeSet(seq: 1, types: ["notes"])) == nil)
    }

    @Test func escapesAsTheEncoderDoes() throws {
        var changeSet = ChangeSet(types: ["notes"])
        let text = "a/b \"q\" \\ \u{8}\u{c}\n\r\t\u{0}\u{b}\u{1f}\u{7f} é 😀"
        changeSet.entities["notes"] = EntityChanges(update: [7], attributes: [7: ["body": .string(text)]])
        let bytes = try #require(CanonicalFormWriter.bytes(changeSet))
        #expect(bytes == (try encoder(changeSet)))
        #expect(String(decoding: bytes, as: UTF8.self).contains(#"a\/b \"q\" \\ \b\f\n\r\t\u0000\u000b\u001f"#))
    }
}

/// Random change sets with awkward names, ids and strings.
private struct RandomChangeSets {
    var generator: SplitMix64

    init(seed: UInt64) { generator = SplitMix64(seed: seed) }

    mutating func next() -> UInt64 { generator.next() }

    mutating func below(_ bound: Int) -> Int { Int(next() % UInt64(bound)) }

    mutating func pick<T>(_ options: [T]) -> T { options[below(options.count)] }

    mutating func changeSet() -> ChangeSet {
        let pool = ["notes", "Notes", "note", "notes2", "a/b", "é", "z", "Z", "_x", "a b", "😀", "types", "\u{1}x"]
        var names: [String] = []
        for _ in 0..<below(4) {
            let name = pick(pool)
            if !names.contains(name) || below(20) == 0 { names.append(name) }
        }
        var changeSet = ChangeSet(types: names)
        for name in names where below(8) != 0 {
            changeSet.entities[name] = EntityChanges(
                create: integers(), update: integers(), delete: integers(),
                attributes: Dictionary(uniqueKeysWithValues: Set((0..<below(4)).map { _ in id() }).map { ($0, attributes()) }))
        }
        return changeSet
    }

    mutating func integers() -> [Int64] { (0..<below(4)).map { _ in id() } }

    mutating func id() -> Int64 {
        switch below(4) {
        case 0: pick([Int64.min, Int64.max, 0, -1, 9, 10, -10, 100])
        case 1: Int64(bitPattern: next())
        default: Int64(below(2_001)) - 1_000
        }
    }

    mutating func attributes() -> Attributes {
        let names = ["body", "Body", "b", "pinned", "author_id", "a/b", "é", "10", "9", "", "x\"y"]
        var values: Attributes = [:]
        for _ in 0..<below(5) { values[pick(names)] = value() }
        return values
    }

    mutating func value() -> JSONValue {
        switch below(12) {
        case 0: .null
        case 1: .unsupported
        case 2: .bool(below(2) == 0)
        case 3, 4: .integer(id())
        case 5: .double(Double(below(1000)) / 8)
        default: .string(text())
        }
    }

    mutating func text() -> String {
        let pieces = ["a", "b c", "/", "\\", "\"", "\u{8}", "\u{c}", "\n", "\r", "\t", "\u{0}", "\u{b}", "\u{1f}", "\u{7f}", "é", "€", "😀", "0", "<", "&"]
        return (0..<below(8)).map { _ in pick(pieces) }.joined()
    }
}
