import Foundation
import RevsyncLink
import Testing

@testable import RevsyncWire

/// `SyncResponseReader` must never disagree with `JSONDecoder`: whatever it reads, the decoder
/// reads the same from the same bytes. And it must read what the server writes, or the device
/// saves nothing.
@Suite struct SyncResponseReaderTests {
    private func foundation(_ json: [UInt8]) -> SyncResponse? {
        try? JSONDecoder().decode(SyncResponse.self, from: Data(json))
    }

    @Test(arguments: [
        #"{"changeSets":[],"maxRevision":0}"#,
        #"{"changeSets":[{"revision":12,"types":["notes"],"notes":{"create":[40],"update":[],"delete":[],"attributes":{"40":{"body":"bench note 5","pinned":false,"score":1.5,"big":1e+20}}}}],"maxRevision":12,"history":"0b4f0c3e-5a7e-4d0e-9a51-4a0b1c2d3e4f"}"#,
        #"{"changeSets":[{"revision":3,"seq":7,"types":[]}],"maxRevision":3,"more":true}"#,
        #"{"changeSets":[{"conflict":true,"seq":8,"reason":{"code":"stale_revision","entity":"notes","id":40,"message":"notes 40 changed at revision 12, after the device's 11"},"types":["notes"],"notes":{"create":[],"update":[40],"delete":[],"attributes":{"40":{"body":"theirs"}}}}],"maxRevision":12}"#,
        #"{"changeSets":[{"conflict":true,"seq":9,"resync":true,"reason":{"code":"invalid","entity":null,"id":null,"message":"too large"},"types":[]}],"maxRevision":12}"#,
        #"{"changeSets":[{"revision":5,"types":["notes"],"notes":{"attributes":{"-3":{"a":null}}}}],"maxRevision":5,"more":null,"history":null,"lastSeq":null}"#,
        #"{"maxRevision":100,"changeSets":[{"revision":100,"types":["players","notes"],"players":{"update":[1]},"notes":{"delete":[2]}}],"lastSeq":41}"#,
    ])
    func readsWhatTheDecoderReads(json: String) throws {
        let bytes = Array(json.utf8)
        let expected = try #require(foundation(bytes))
        #expect(SyncResponseReader.read(bytes) == expected)
    }

    @Test(arguments: [
        // Outside the shape the server writes: the decoder takes these (or refuses them) itself.
        #"{"maxRevision":1,"changeSets":[],"extra":1}"#,
        #"{"maxRevision":1,"changeSets":[],"more":1}"#,
        #"{"maxRevision":1,"changeSets":[],"lastSeq":1.0}"#,
        #"{"maxRevision":1,"changeSets":[{"revision":1.5,"types":[]}]}"#,
        #"{"maxRevision":1,"changeSets":[{"conflict":true,"reason":{"code":"stale_revision","message":"m","extra":1},"types":[]}]}"#,
        #"{"maxRevision":1,"changeSets":[{"types":["notes"],"notes":{"update":[9],"attributes":{"9":{"x":{}}}}}]}"#,
        #"{"maxRevision":1,"changeSets":[],"more":true,"more":false}"#,
        #"{"maxRevision":1,"changeSets":[{"conflict":true,"reason":{"code":"invalid","code":"invalid","message":"m"},"types":[]}]}"#,
        // Invalid: the decoder words the error.
        #"{"maxRevision":1}"#,
        #"{"changeSets":[]}"#,
        #"{"maxRevision":1,"changeSets":[{"conflict":true,"reason":{"code":"unheard_of","message":"m"},"types":[]}]}"#,
        #"{"maxRevision":1,"changeSets":[{"conflict":true,"reason":{"code":"invalid"},"types":[]}]}"#,
        #"{"maxRevision":1,"changeSets":[{"conflict":true,"reason":{"message":"m"},"types":[]}]}"#,
        #"{"maxRevision":1,"changeSets":[{"types":["notes"]}]}"#,
        #"{"maxRevision":1,"changeSets":[]"#,
        "",
    ])
    func leavesTheRestToTheDecoder(json: String) {
        #expect(SyncResponseReader.read(Array(json.utf8)) == nil)
    }

    /// What the server writes, field by field as `SyncResponse`'s own encoder does: read back equal.
    @Test func readsWhatTheEncoderWrites() throws {
        var changeSet = ChangeSet(revision: 7)
        changeSet["notes"].create = [40, 41]
        changeSet["notes"].attributes = [40: ["body": "caf\u{e9} \"quoted\"\n", "score": .double(0.1), "count": .integer(-3), "pinned": .bool(true), "gone": .null], 41: [:]]
        var corrective = ChangeSet(seq: 3, conflict: true, reason: ConflictReason(code: .reference, entity: "players", id: 9, message: "player 9 is gone"), resync: false)
        corrective["players"].delete = [9]
        let response = SyncResponse(maxRevision: 7, changeSets: [changeSet, corrective], more: false, history: "h", lastSeq: 2)
        let bytes = Array(try JSONEncoder().encode(response))
        #expect(SyncResponseReader.read(bytes) == response)
    }

    /// Random answers written with random spacing, key order and escapes: every one is read,
    /// and read as the decoder reads it. Then each is damaged at random: whatever the reader
    /// still reads, the decoder reads the same.
    @Test func agreesWithTheDecoderOnRandomBodies() {
        RandomBody.compare(seed: 20_261_129, write: RandomBody.response, read: SyncResponseReader.read, decode: foundation)
    }
}
