import AsyncHTTPClient
import Foundation
import NIOCore

/// One `GET /snapshot` as the snapshot bench asks it: how long its headers took, and how large it is.
struct SnapshotAnswer {
    enum Kind: String, Codable {
        case json, sqlite

        static let sqliteType = "application/vnd.sqlite3"
    }

    /// From the request sent to its headers received: the server prepares the whole answer
    /// (builds the SQLite file, or writes the JSON one to its spool) before it sends them.
    let headersSeconds: Double
    /// `Content-Length`, which the body's bytes must match.
    let bytes: Int
    let gzip: Bool
    /// `Revsync-Snapshot-Revision` of a SQLite answer.
    let revision: Int64?

    /// Asks for the snapshot as `kind`, gzip or not, reads the body to its end (counting it,
    /// not keeping it) and checks that it is what was asked for. `atHeaders` runs as soon as
    /// the headers arrive: the server's state once it has prepared the answer, before sending
    /// it moves anything.
    static func fetch<Reading>(
        http: HTTPClient, baseURL: String, token: String, kind: Kind, gzip: Bool, timeout: Duration, atHeaders: () throws -> Reading
    ) async throws -> (answer: SnapshotAnswer, atHeaders: Reading) {
        var request = HTTPClientRequest(url: baseURL + "/snapshot")
        request.headers.add(name: "Authorization", value: "Bearer \(token)")
        if kind == .sqlite { request.headers.add(name: "Accept", value: Kind.sqliteType) }
        if gzip { request.headers.add(name: "Accept-Encoding", value: "gzip") }
        let what = "GET /snapshot (\(kind.rawValue)\(gzip ? ", gzip" : ""))"
        let clock = ContinuousClock()
        let sent = clock.now
        let response = try await http.execute(request, timeout: .seconds(timeout.components.seconds))
        let headersSeconds = (clock.now - sent).inSeconds
        let reading = try atHeaders()
        guard response.status == .ok else {
            let body = (try? await response.body.collect(upTo: 64 * 1024)) ?? ByteBuffer()
            throw BenchError("\(what) answered \(response.status): \(String(buffer: body))")
        }
        let type = response.headers["Content-Type"].first ?? ""
        guard type.hasPrefix(kind == .sqlite ? Kind.sqliteType : "application/json") else {
            throw BenchError("\(what) answered Content-Type \(type): does this server build SQLite snapshot files?")
        }
        let encoded = response.headers["Content-Encoding"].contains("gzip")
        guard encoded == gzip else { throw BenchError("\(what) answered with Content-Encoding \(response.headers["Content-Encoding"])") }
        guard let length = response.headers["Content-Length"].first.flatMap({ Int($0) }) else {
            throw BenchError("\(what) answered without a Content-Length")
        }
        var received = 0
        for try await chunk in response.body { received += chunk.readableBytes }
        guard received == length else { throw BenchError("\(what) said Content-Length \(length) and sent \(received) bytes") }
        let answer = SnapshotAnswer(
            headersSeconds: headersSeconds, bytes: length, gzip: gzip,
            revision: response.headers["Revsync-Snapshot-Revision"].first.flatMap { Int64($0) })
        return (answer, reading)
    }
}
