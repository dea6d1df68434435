import Foundation
import RevsyncLink
import Testing

@testable import RevsyncWire

/// `SyncRequestReader` must never disagree with `JSONDecoder`: whatever it reads, the decoder
/// reads the same from the same bytes. And it must read the usual bodies, or it saves nothing.
@Suite struct SyncRequestReaderTests {
    private func foundation(_ json: [UInt8]) -> SyncRequest? {
        try? JSONDecoder().decode(SyncRequest.self, from: Data(json))
    }

    @Test(arguments: [
        #"{"maxRevision":0,"changeSets":[]}"#,
        #"{"maxRevision":1234,"changeSets":[{"seq":5,"types":["notes"],"notes":{"create":[-5],"attributes":{"-5":{"body":"bench note 5","pinned":false}}}}]}"#,
        #" { "changeSets" : [ ] , "maxRevision" : 7 , "wait" : 25 } "#,
        #"{"maxRevision":7,"changeSets":[],"wait":0.5}"#,
        #"{"maxRevision":7,"changeSets":[],"wait":null}"#,
        #"{"maxRevision":7,"changeSets":[],"history":"0b4f0c3e-5a7e-4d0e-9a51-4a0b1c2d3e4f","wait":2}"#,
        #"{"maxRevision":7,"changeSets":[],"history":null}"#,
        #"{"maxRevision":-0,"changeSets":[],"wait":-0}"#,
        #"{"maxRevision":9223372036854775807,"changeSets":[]}"#,
        #"{"maxRevision":-9223372036854775808,"changeSets":[]}"#,
        #"{"maxRevision":3,"changeSets":[{"seq":null,"types":null},{"types":[]},{}]}"#,
        #"{"maxRevision":3,"changeSets":[{"players":{"update":[12],"delete":null,"create":null},"seq":2,"types":["players","notes"],"notes":{"delete":[-4,7],"update":[],"attributes":{}}}]}"#,
        #"{"maxRevision":3,"changeSets":[{"seq":1,"types":["notes"],"notes":{"update":[9],"attributes":{"9":{"a":null,"b":true,"c":-17,"d":"","e":"tab\tnew\nline \"quoted\" back\\slash \/ \u00e9\u20ac \ud83d\ude00 done"}}}}]}"#,
        #"{"maxRevision":3,"changeSets":[{"seq":1,"types":["n\u00f6tes"],"n\u00f6tes":{"create":[-1]}}]}"#,
        "{\"maxRevision\":3,\"changeSets\":[{\"seq\":1,\"types\":[\"notes\"],\"notes\":{\"update\":[9],\"attributes\":{\"9\":{\"body\":\"h\u{e9}llo \u{1F600}\"}}}}]}",
        "{\"maxRevision\":1,\r\n\t\"changeSets\":[]}\n",
    ])
    func readsWhatTheDecoderReads(json: String) throws {
        let bytes = Array(json.utf8)
        let expected = try #require(foundation(bytes))
        #expect(SyncRequestReader.read(bytes) == expected)
    }

    @Test(arguments: [
        // Outside the usual shape: the decoder takes these (or refuses them) itself.
        #"{"maxRevision":1,"changeSets":[],"extra":1}"#,
        #"{"maxRevision":1.0,"changeSets":[]}"#,
        #"{"maxRevision":1e2,"changeSets":[]}"#,
        #"{"maxRevision":1,"changeSets":[],"wait":1e1}"#,
        #"{"maxRevision":1,"changeSets":[],"history":7}"#,
        #"{"maxRevision":9223372036854775808,"changeSets":[]}"#,
        #"{"maxRevision":1,"changeSets":[{"seq":1,"types":["notes"],"notes":{"update":[9],"attributes":{"9":{"x":1.5}}}}]}"#,
        #"{"maxRevision":1,"changeSets":[{"seq":1,"types":["notes"],"notes":{"update":[9],"attributes":{"9":{"x":[1]}}}}]}"#,
        #"{"maxRevision":1,"changeSets":[{"seq":1,"types":["notes"],"notes":{"update":[9],"attributes":{"9":{"x":99999999999999999999}}}}]}"#,
        #"{"maxRevision":1,"changeSets":[{"seq":1,"revision":4,"types":[]}]}"#,
        #"{"maxRevision":1,"changeSets":[{"seq":1,"reason":null,"types":[]}]}"#,
        #"{"maxRevision":1,"changeSets":[{"seq":1,"types":["notes"],"notes":{"update":[9],"extra":[]}}]}"#,
        // A key twice.
        #"{"maxRevision":1,"maxRevision":2,"changeSets":[]}"#,
        #"{"maxRevision":1,"changeSets":[{"seq":1,"types":["notes"],"notes":{"update":[9],"attributes":{"9":{"x":1,"x":2}}}}]}"#,
        // Invalid: the decoder words the error.
        #"{"maxRevision":1}"#,
        #"{"changeSets":[]}"#,
        #"{"maxRevision":null,"changeSets":[]}"#,
        #"{"maxRevision":01,"changeSets":[]}"#,
        #"{"maxRevision":-,"changeSets":[]}"#,
        #"{"maxRevision":1,"changeSets":[]} x"#,
        #"{"maxRevision":1,"changeSets":[],}"#,
        #"{"maxRevision":1,"changeSets":[1]}"#,
        #"{"maxRevision":1,"changeSets":[{"types":["notes","notes"],"notes":{}}]}"#,
        #"{"maxRevision":1,"changeSets":[{"types":["notes"]}]}"#,
        #"{"maxRevision":1,"changeSets":[{"types":[],"notes":{}}]}"#,
        #"{"maxRevision":1,"changeSets":[{"types":["seq"],"seq":1}]}"#,
        #"{"maxRevision":1,"changeSets":[{"types":["notes"],"notes":{"attributes":{"09":{}}}}]}"#,
        #"{"maxRevision":1,"changeSets":[{"types":["notes"],"notes":{"attributes":{"+9":{}}}}]}"#,
        #"{"maxRevision":1,"changeSets":[{"types":["notes"],"notes":{"attributes":null}}]}"#,
        #"{"maxRevision":1,"changeSets":[{"types":["notes"],"notes":{"attributes":{"9":null}}}]}"#,
        #"{"maxRevision":1,"changeSets":[{"types":["n\ud800"],"n\ud800":{}}]}"#,
        #"{"maxRevision":1,"changeSets":[{"types":["a\x"]}]}"#,
        #"{"maxRevision":1,"changeSets":[],"wait":.5}"#,
        #"{"maxRevision":1,"changeSets":[],"wait":1.}"#,
        #"{"maxRevision":1,"changeSets":[],"wait":nul}"#,
        #"{"maxRevision":1,"changeSets":[],"wait":nullx}"#,
        "",
        "[]",
        "{",
    ])
    func leavesTheRestToTheDecoder(json: String) {
        #expect(SyncRequestReader.read(Array(json.utf8)) == nil)
    }

    @Test func refusesRawControlCharactersAndBytesThatAreNotUTF8() {
        let control = Array(#"{"maxRevision":1,"changeSets":[{"types":["a"#.utf8) + [0x0A] + Array(#""],"a":{}}]}"#.utf8)
        let invalid = Array(#"{"maxRevision":1,"changeSets":[{"types":["a"#.utf8) + [0xFF] + Array(#""],"a":{}}]}"#.utf8)
        #expect(SyncRequestReader.read(control) == nil)
        #expect(SyncRequestReader.read(invalid) == nil)
        // A literal run into a number is neither (CI's random bodies found the reader taking
        // `null5` as 5 once).
        let nullRunOn = Array(#"{"maxRevision":1,"changeSets":[],"wait":null5}"#.utf8)
        #expect(SyncRequestReader.read(nullRunOn) == nil)
        #expect(foundation(nullRunOn) == nil)
        #expect(foundation(invalid) == nil)
    }

    /// Random requests written with random spacing, key order and escapes: every one is read,
    /// and read as the decoder reads it. Then each is damaged at random: whatever the reader
    /// still reads, the decoder reads the same.
    @Test func agreesWithTheDecoderOnRandomBodies() {
        var random = SplitMix64(seed: 20_261_125)
        var damagedRead = 0
        for _ in 0..<3_000 {
            let json = RandomBody.request(&random)
            guard let expected = foundation(json) else {
                Issue.record("the decoder refused a generated body: \(String(decoding: json, as: UTF8.self))")
                continue
            }
            #expect(SyncRequestReader.read(json) == expected, "\(String(decoding: json, as: UTF8.self))")
            var damaged = json
            let position = Int(random.next() % UInt64(damaged.count))
            switch random.next() % 3 {
            case 0: damaged.remove(at: position)
            case 1: damaged.insert(RandomBody.punctuation(&random), at: position)
            default: damaged[position] = RandomBody.punctuation(&random)
            }
            if let read = SyncRequestReader.read(damaged) {
                damagedRead += 1
                #expect(read == foundation(damaged), "\(String(decoding: damaged, as: UTF8.self))")
            }
        }
        // Some damage leaves valid JSON (a space, a digit in a number): those are compared too.
        #expect(damagedRead > 0)
    }
}

/// Writes random sync requests within the reader's shape, in JSON written by hand.
enum RandomBody {
    static func request(_ random: inout SplitMix64) -> [UInt8] {
        var members = [("maxRevision", integer(&random)), ("changeSets", array((0..<Int.random(in: 0...3, using: &random)).map { _ in changeSet(&random) }, &random))]
        switch Int.random(in: 0...3, using: &random) {
        case 0: members.append(("wait", "null"))
        case 1: members.append(("wait", String(Int.random(in: 0...60, using: &random))))
        case 2: members.append(("wait", "\(Int.random(in: 0...60, using: &random)).\(Int.random(in: 0...999, using: &random))"))
        default: break
        }
        return Array((space(&random) + object(members, &random) + space(&random)).utf8)
    }

    static func changeSet(_ random: inout SplitMix64) -> String {
        var members: [(String, String)] = []
        if Bool.random(using: &random) { members.append(("seq", Bool.random(using: &random) ? integer(&random) : "null")) }
        let names = Array(Set((0..<Int.random(in: 0...2, using: &random)).map { _ in name(&random) })).sorted()
        if !names.isEmpty || Bool.random(using: &random) { members.append(("types", array(names.map { quoted($0, &random) }, &random))) }
        for entity in names { members.append((entity, entityChanges(&random))) }
        return object(members.shuffled(using: &random), &random)
    }

    static func entityChanges(_ random: inout SplitMix64) -> String {
        var members: [(String, String)] = []
        for key in ["create", "update", "delete"] where Bool.random(using: &random) {
            members.append((key, Int.random(in: 0...5, using: &random) == 0 ? "null" : array((0..<Int.random(in: 0...3, using: &random)).map { _ in integer(&random) }, &random)))
        }
        if Bool.random(using: &random) {
            let ids = Set((0..<Int.random(in: 0...3, using: &random)).map { _ in Int64.random(in: -50...50, using: &random) })
            let byId = ids.map { id -> (String, String) in
                let names = Set((0..<Int.random(in: 0...3, using: &random)).map { _ in name(&random) })
                return (String(id), object(names.map { ($0, scalar(&random)) }, &random))
            }
            members.append(("attributes", object(byId, &random)))
        }
        return object(members.shuffled(using: &random), &random)
    }

    static func scalar(_ random: inout SplitMix64) -> String {
        switch Int.random(in: 0...4, using: &random) {
        case 0: "null"
        case 1: Bool.random(using: &random) ? "true" : "false"
        case 2: integer(&random)
        default: quoted(text(&random), &random)
        }
    }

    static func integer(_ random: inout SplitMix64) -> String {
        switch Int.random(in: 0...3, using: &random) {
        case 0: String(Int64.random(in: Int64.min...Int64.max, using: &random))
        case 1: String([Int64.min, Int64.max, 0, -1][Int.random(in: 0...3, using: &random)])
        default: String(Int64.random(in: -1_000...1_000, using: &random))
        }
    }

    static func name(_ random: inout SplitMix64) -> String {
        ["notes", "players", "a", "t\u{e9}", "x_y", "Z9"][Int.random(in: 0...5, using: &random)]
    }

    static func text(_ random: inout SplitMix64) -> String {
        let pieces = ["a", "b c", "\"", "\\", "/", "\n", "\t", "\u{1}", "\u{e9}", "\u{20ac}", "\u{1F600}", "0", " "]
        return (0..<Int.random(in: 0...6, using: &random)).map { _ in pieces[Int.random(in: 0..<pieces.count, using: &random)] }.joined()
    }

    /// A JSON string, each character written plainly or as an escape, at random.
    static func quoted(_ value: String, _ random: inout SplitMix64) -> String {
        var out = "\""
        for scalar in value.unicodeScalars {
            let escapeAnyway = Int.random(in: 0...4, using: &random) == 0
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += Bool.random(using: &random) ? "\\n" : "\\u000a"
            case "\t": out += "\\t"
            case "/": out += escapeAnyway ? "\\/" : "/"
            case _ where scalar.value < 0x20 || escapeAnyway:
                for unit in String(scalar).utf16 { out += "\\u" + String(format: "%04x", unit) }
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }

    static func object(_ members: [(String, String)], _ random: inout SplitMix64) -> String {
        "{" + space(&random) + members.map { quoted($0.0, &random) + space(&random) + ":" + space(&random) + $0.1 }.joined(separator: space(&random) + "," + space(&random)) + space(&random) + "}"
    }

    static func array(_ elements: [String], _ random: inout SplitMix64) -> String {
        "[" + space(&random) + elements.joined(separator: space(&random) + "," + space(&random)) + space(&random) + "]"
    }

    static func space(_ random: inout SplitMix64) -> String {
        ["", "", "", " ", "\n", "\t ", "\r\n"][Int.random(in: 0...6, using: &random)]
    }

    static func punctuation(_ random: inout SplitMix64) -> UInt8 {
        let bytes = Array(#"{}[]:,"\ 0159-.eEtfnul"#.utf8)
        return bytes[Int.random(in: 0..<bytes.count, using: &random)]
    }
}
