import Foundation
import Testing

@testable import RevsyncWire

@Suite struct JSONValueTests {
    /// Decodes one value the way it arrives inside an attributes object.
    private func decode(_ json: String) throws -> JSONValue {
        let wrapped = try JSONDecoder().decode([String: JSONValue].self, from: Data(#"{"v": \#(json)}"#.utf8))
        return try #require(wrapped["v"])
    }

    @Test(arguments: [
        ("null", JSONValue.null),
        ("true", .bool(true)),
        ("false", .bool(false)),
        ("1", .integer(1)),
        ("0", .integer(0)),
        ("-749", .integer(-749)),
        ("9223372036854775807", .integer(.max)),
        ("1.5", .double(1.5)),
        ("-0.25", .double(-0.25)),
        ("\"2\"", .string("2")),
        ("\"\"", .string("")),
        ("\"true\"", .string("true")),
        ("[1, 2]", .unsupported),
        ("[]", .unsupported),
        ("{\"a\": 1}", .unsupported),
        ("{}", .unsupported),
    ])
    func decodesEachJSONKind(json: String, expected: JSONValue) throws {
        #expect(try decode(json) == expected)
    }

    @Test func integersAndFractionsStayDistinct() throws {
        #expect(try decode("1").integerValue == 1)
        #expect(try decode("1.5").integerValue == nil)
        #expect(try decode("1") != decode("1.5"))
    }

    @Test func booleansAreNotNumbers() throws {
        #expect(try decode("true") == .bool(true))
        #expect(try decode("true").integerValue == nil)
        #expect(try decode("1") != .bool(true))
        #expect(try decode("0") != .bool(false))
    }

    @Test func integerBeyondInt64BecomesADouble() throws {
        #expect(try decode("9223372036854775808") == .double(9_223_372_036_854_775_808))
    }

    @Test func unsupportedEncodesAsNull() throws {
        let data = try JSONEncoder().encode(["v": JSONValue.unsupported])
        #expect(String(decoding: data, as: UTF8.self) == #"{"v":null}"#)
    }

    @Test(arguments: [JSONValue.null, .bool(false), .integer(-3), .double(2.75), .string("x\u{1}y")])
    func encodeDecodeRoundTrips(value: JSONValue) throws {
        let data = try JSONEncoder().encode(["v": value])
        #expect(try JSONDecoder().decode([String: JSONValue].self, from: data)["v"] == value)
    }

    @Test func accessorsAnswerOnlyForTheirKind() {
        #expect(JSONValue.string("a").stringValue == "a")
        #expect(JSONValue.integer(3).stringValue == nil)
        #expect(JSONValue.null.isNull)
        #expect(!JSONValue.string("").isNull)
        #expect(JSONValue.unsupported.kindName == "an array or object")
    }
}
