import Foundation
import Testing

@testable import RevsyncWire

@Suite struct JSONWriterTests {
    private func written(_ write: (inout JSONWriter) -> Void) -> String {
        var writer = JSONWriter()
        write(&writer)
        return String(decoding: writer.bytes, as: UTF8.self)
    }

    /// Parses a JSON string literal the writer produced back into a Swift string.
    private func parsedString(_ text: String) throws -> String {
        try JSONDecoder().decode(String.self, from: Data(text.utf8))
    }

    @Test func quotesBackslashesAndLineBreaksAreEscaped() {
        #expect(written { $0.string("a\"b") } == #""a\"b""#)
        #expect(written { $0.string("a\\b") } == #""a\\b""#)
        #expect(written { $0.string("a\nb") } == #""a\nb""#)
        #expect(written { $0.string("a\rb\tc") } == #""a\rb\tc""#)
    }

    @Test func controlCharactersAndDeleteUseUnicodeEscapes() {
        #expect(written { $0.string("\u{01}") } == #""\u0001""#)
        #expect(written { $0.string("\u{00}") } == #""\u0000""#)
        #expect(written { $0.string("\u{1F}") } == #""\u001f""#)
        #expect(written { $0.string("\u{7F}") } == #""\u007f""#)
    }

    @Test func noRawControlByteEverAppearsInAString() throws {
        // The server stores byte 0x01 as a revision placeholder: a string must never produce it.
        let every = String(decoding: (0..<0x20).map { UInt8($0) } + [0x7F], as: UTF8.self)
        var writer = JSONWriter()
        writer.string("x" + every + "y")
        #expect(!writer.bytes.contains(JSONWriter.placeholder))
        #expect(!writer.bytes.contains { $0 < 0x20 || $0 == 0x7F })
        #expect(try parsedString(String(decoding: writer.bytes, as: UTF8.self)) == "x" + every + "y")
    }

    @Test func keysAreEscapedLikeStrings() {
        #expect(written { $0.key("a\u{1}\"") } == #""a\u0001\"":"#)
    }

    @Test func nonASCIIPassesThroughAsUTF8() throws {
        let text = "Zürich · 東京 · 🏀 · \u{2028}"
        let json = written { $0.string(text) }
        #expect(json == "\"\(text)\"")
        #expect(try parsedString(json) == text)
    }

    @Test func integralDoublesPrintWithoutFraction() {
        #expect(written { $0.double(2.0) } == "2")
        #expect(written { $0.double(-3.0) } == "-3")
        #expect(written { $0.double(0.0) } == "0")
        #expect(written { $0.value(.double(5)) } == "5")
    }

    @Test func fractionalDoublesKeepTheirFraction() {
        #expect(written { $0.double(2.5) } == "2.5")
        #expect(written { $0.double(-0.125) } == "-0.125")
    }

    @Test(arguments: [1e20, -1e20, 1e15, 123_456_789_012_345_680.0, 0.1, 1.0 / 3.0, 1e-7, Double.leastNonzeroMagnitude, Double.greatestFiniteMagnitude])
    func doubleOutputParsesBackToTheSameValue(number: Double) throws {
        let json = written { $0.double(number) }
        let parsed = try JSONDecoder().decode(Double.self, from: Data(json.utf8))
        #expect(parsed == number, "wrote \(json)")
        let viaSerialization = try JSONSerialization.jsonObject(with: Data("[\(json)]".utf8)) as? [NSNumber]
        #expect(viaSerialization?.first?.doubleValue == number, "wrote \(json)")
    }

    @Test func nonFiniteDoublesBecomeNull() {
        #expect(written { $0.double(.infinity) } == "null")
        #expect(written { $0.double(.nan) } == "null")
    }

    @Test func valuesOfEveryKind() {
        #expect(written { $0.value(.null) } == "null")
        #expect(written { $0.value(.unsupported) } == "null")
        #expect(written { $0.value(.bool(true)) } == "true")
        #expect(written { $0.value(.bool(false)) } == "false")
        #expect(written { $0.value(.integer(Int64.min)) } == "-9223372036854775808")
        #expect(written { $0.value(.string("s")) } == #""s""#)
    }

    @Test func arraysAreCompact() {
        #expect(written { $0.integerArray([]) } == "[]")
        #expect(written { $0.integerArray([-10, 0, 321]) } == "[-10,0,321]")
        #expect(written { $0.stringArray(["a", "b\"c"]) } == #"["a","b\"c"]"#)
    }

    @Test func placeholderIsTheOnlyControlByteInAnObject() {
        var writer = JSONWriter()
        writer.raw("{")
        writer.key("revision")
        writer.revisionPlaceholder()
        writer.raw(",")
        writer.key("note\u{1}")
        writer.string("\u{1}\u{1}")
        writer.raw("}")
        #expect(writer.bytes.filter { $0 == JSONWriter.placeholder }.count == 1)
    }

    @Test func writtenObjectDecodesToTheSameValues() throws {
        let values: [(String, JSONValue)] = [
            ("s", .string("line\nquote\" back\\ ctl\u{1}\u{7F} é")),
            ("i", .integer(-749)),
            ("d", .double(2.5)),
            ("big", .double(1e20)),
            ("b", .bool(true)),
            ("n", .null),
        ]
        var writer = JSONWriter()
        writer.raw("{")
        for (index, (name, value)) in values.enumerated() {
            if index > 0 { writer.raw(",") }
            writer.key(name)
            writer.value(value)
        }
        writer.raw("}")
        let decoded = try JSONDecoder().decode([String: JSONValue].self, from: Data(writer.bytes))
        #expect(decoded == Dictionary(uniqueKeysWithValues: values))
        #expect(try JSONSerialization.jsonObject(with: Data(writer.bytes)) is [String: Any])
    }

    @Test func integralDoubleReadsBackAsTheSameNumber() throws {
        // 2.0 is written as 2, as in the contract's example; it is the same number for any reader.
        let json = written { $0.double(2.0) }
        #expect(try JSONDecoder().decode(Double.self, from: Data(json.utf8)) == 2.0)
    }
}
