import Foundation
import RevsyncLink
import RevsyncTestSupport
import Testing

/// Gzip answers assembled from fragments, read by other people's decoders over a real
/// socket: curl's (`--compressed`) and Python's `gzip.decompress`, both of which refuse
/// or cut short what is not one whole gzip member.
@Suite struct GzipClientsTests {
    static func curl(_ url: URL, _ path: String, token: String, body: String, extra: [String] = []) async throws -> Data {
        try await runProgram(["curl", "-sS", "--fail-with-body", "-X", "POST", "-H", "Authorization: Bearer \(token)", "-H", "Content-Type: application/json",
                 "--data-binary", body] + extra + [url.appendingPathComponent(path).absoluteString])
    }

    @Test func curlAndPythonDecodeTheAssembledAnswers() async throws {
        try await withLiveServer { live in
            let registered = try await Self.curl(live.baseURL, "devices", token: live.adminToken, body: #"{"name":"phone","user":"ann","role":"member"}"#)
            let token = try #require(try JSONSerialization.jsonObject(with: registered) as? [String: Any])["token"] as? String ?? ""
            // Two requests of change sets, so that the answer joins fragments of several commits and both forms.
            for first in [1, 41] {
                let sets = (first..<(first + 40)).map { seq in
                    #"{"seq":\#(seq),"types":["notes"],"notes":{"create":[-\#(seq)],"attributes":{"-\#(seq)":{"body":"note \#(seq) \#(String(repeating: "é", count: seq))","pinned":false}}}}"#
                }
                _ = try await Self.curl(live.baseURL, "sync", token: token, body: #"{"maxRevision":0,"changeSets":[\#(sets.joined(separator: ","))]}"#)
            }
            let catchUp = #"{"maxRevision":0,"changeSets":[]}"#
            let plain = try await Self.curl(live.baseURL, "sync", token: token, body: catchUp)
            #expect(String(decoding: plain, as: UTF8.self).contains("\"maxRevision\":80"))
            let viaCurl = try await Self.curl(live.baseURL, "sync", token: token, body: catchUp, extra: ["--compressed"])
            #expect(viaCurl == plain)
            let compressed = try await Self.curl(live.baseURL, "sync", token: token, body: catchUp, extra: ["-H", "Accept-Encoding: gzip"])
            #expect(compressed.prefix(2) == Data([0x1f, 0x8b]))
            #expect(compressed.count < plain.count)
            let viaPython = try await runProgram(
                ["python3", "-c", "import gzip, sys; sys.stdout.buffer.write(gzip.decompress(sys.stdin.buffer.read()))"], input: compressed)
            #expect(viaPython == plain)
        }
    }
}
