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
        // Numbers that are not integers within Int64 are what JSONDecoder makes of their bytes.
        #"{"maxRevision":1,"changeSets":[{"seq":1,"types":["notes"],"notes":{"update":[9],"attributes":{"9":{"x":1.5,"y":2.0,"z":-0.0,"w":1e+15,"v":1E2,"u":1e-05,"t":1e400,"s":99999999999999999999}}}}]}"#,
        // Keys of answers are read in requests too.
        #"{"maxRevision":1,"changeSets":[{"seq":1,"revision":4,"conflict":false,"resync":null,"types":[]}]}"#,
        #"{"maxRevision":1,"changeSets":[{"seq":1,"reason":null,"types":[]}]}"#,
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
        #"{"maxRevision":1,"changeSets":[{"seq":1,"types":["notes"],"notes":{"update":[9],"attributes":{"9":{"x":[1]}}}}]}"#,
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
        #"{"maxRevision":1,"changeSets":[{"types":["notes"],"notes":{"update":[9],"attributes":{"9":{"x":1.}}}}]}"#,
        #"{"maxRevision":1,"changeSets":[{"types":["notes"],"notes":{"update":[9],"attributes":{"9":{"x":1e}}}}]}"#,
        #"{"maxRevision":1,"changeSets":[{"types":["notes"],"notes":{"update":[9],"attributes":{"9":{"x":1e+}}}}]}"#,
        #"{"maxRevision":1,"changeSets":[{"types":["notes"],"notes":{"update":[9],"attributes":{"9":{"x":01.5}}}}]}"#,
        #"{"maxRevision":1,"changeSets":[{"types":["notes"],"notes":{"update":[9],"attributes":{"9":{"x":1.5.5}}}}]}"#,
        #"{"maxRevision":1,"changeSets":[{"seq":1,"conflict":1,"types":[]}]}"#,
        #"{"maxRevision":1,"changeSets":[{"seq":1,"revision":4,"revision":4,"types":[]}]}"#,
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

    /// A `wait` that a double cannot hold: `Double` would make it infinity or zero, and the
    /// decoder refuses it, so the reader leaves it to the decoder (which words the error). The
    /// extremes a double does hold are read, and as the decoder reads them.
    @Test func leavesWaitsADoubleCannotHoldToTheDecoder() throws {
        let body = { (wait: String) in Array(#"{"maxRevision":1,"changeSets":[],"wait":"#.utf8) + Array(wait.utf8) + Array("}".utf8) }
        let zeros = { (count: Int) in String(repeating: "0", count: count) }
        // 10^309, -10^309, 10^-331, -10^-331.
        for wait in ["1" + zeros(309), "-1" + zeros(309), "0." + zeros(330) + "1", "-0." + zeros(330) + "1"] {
            #expect(SyncRequestReader.read(body(wait)) == nil, "wait \(wait.prefix(8))… (\(wait.count) characters)")
        }
        // 10^308, 10^-301, 5 × 10^-324 (the smallest subnormal), zeros with a fraction and a sign.
        for wait in ["1" + zeros(308), "0." + zeros(300) + "1", "0." + zeros(323) + "5", "0." + zeros(40), "-0.0"] {
            let expected = try #require(foundation(body(wait)), "wait \(wait.prefix(8))… (\(wait.count) characters)")
            #expect(SyncRequestReader.read(body(wait)) == expected, "wait \(wait.prefix(8))… (\(wait.count) characters)")
        }
        // The same extremes as attribute values: whatever the decoder makes of them, the reader does.
        let value = { (number: String) in
            Array(#"{"maxRevision":1,"changeSets":[{"seq":1,"types":["notes"],"notes":{"update":[9],"attributes":{"9":{"x":"#.utf8)
                + Array(number.utf8) + Array("}}}}]}".utf8)
        }
        for number in [
            "5e-324", "4.9e-324", "2.2250738585072014e-308", "2.225073858507201e-308", "1e-400", "-1e-400", "1.7976931348623157e308",
            "1e309", "-1e309", "0." + zeros(330) + "1", "0." + zeros(323) + "5", "1" + zeros(309), "0." + zeros(300) + "15",
        ] {
            #expect(SyncRequestReader.read(value(number)) == foundation(value(number)), "x \(number.prefix(12))… (\(number.count) characters)")
        }
    }

    /// Random requests written with random spacing, key order and escapes: every one is read,
    /// and read as the decoder reads it. Then each is damaged at random: whatever the reader
    /// still reads, the decoder reads the same.
    @Test func agreesWithTheDecoderOnRandomBodies() {
        RandomBody.compare(seed: 20_261_125, write: RandomBody.request, read: SyncRequestReader.read, decode: foundation)
    }
}
