import Foundation
import RevsyncTestSupport
import Testing

/// Gzip answers assembled from fragments, read by other people's decoders over a real
/// socket: curl's (`--compressed`) and Python's `gzip.decompress`, both of which refuse
/// or cut short what is not one whole gzip member.
@Suite struct GzipClientsTests {
    /// Runs a program and returns its standard output; a failure throws with its standard error.
    ///
    /// Output goes to files and the exit is awaited through the termination handler: blocking
    /// reads or `waitUntilExit` would hold one of the few threads the live server runs on.
    static func run(_ arguments: [String], input: Data? = nil) async throws -> Data {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("gzip-clients-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let (inputFile, outputFile, errorFile) = (
            directory.appendingPathComponent("in"), directory.appendingPathComponent("out"), directory.appendingPathComponent("err")
        )
        try (input ?? Data()).write(to: inputFile)
        _ = FileManager.default.createFile(atPath: outputFile.path, contents: nil)
        _ = FileManager.default.createFile(atPath: errorFile.path, contents: nil)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = arguments
        process.standardInput = try FileHandle(forReadingFrom: inputFile)
        process.standardOutput = try FileHandle(forWritingTo: outputFile)
        process.standardError = try FileHandle(forWritingTo: errorFile)
        let status = try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Int32, any Error>) in
            process.terminationHandler = { continuation.resume(returning: $0.terminationStatus) }
            do {
                try process.run()
            } catch {
                process.terminationHandler = nil
                continuation.resume(throwing: error)
            }
        }
        guard status == 0 else {
            let failure = (try? Data(contentsOf: errorFile)) ?? Data()
            throw TestSetupError("\(arguments.joined(separator: " ")) failed (\(status)): \(String(decoding: failure, as: UTF8.self))")
        }
        return try Data(contentsOf: outputFile)
    }

    static func curl(_ url: URL, _ path: String, token: String, body: String, extra: [String] = []) async throws -> Data {
        try await run(["curl", "-sS", "--fail-with-body", "-X", "POST", "-H", "Authorization: Bearer \(token)", "-H", "Content-Type: application/json",
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
            let viaPython = try await Self.run(
                ["python3", "-c", "import gzip, sys; sys.stdout.buffer.write(gzip.decompress(sys.stdin.buffer.read()))"], input: compressed)
            #expect(viaPython == plain)
        }
    }
}
