import AsyncHTTPClient
import Foundation
import NIOCore

/// Part (d): many catch-up clients at once, against the cached server, the PostgreSQL-only one,
/// and `GET /health` as the ceiling of the HTTP layer itself.
///
/// The load comes from wrk, a load generator in C, run as a child process: the bench's own Swift
/// client would spend the cores it shares with the server on itself, and its figures would be the
/// client's as much as the server's.
struct ConcurrentLoad {
    static let connections = [16, 64]
    static let lags: [Int64] = [0, 1, 100, 1_000]
    static let threads = 2

    let wrk: Wrk
    let http: HTTPClient
    let ports: (cached: Int, plain: Int)
    /// Every connection is this one device; `Bench.settings` lifts its per-device limit to match.
    let reader: String
    /// The log's head: each request asks for the last `lag` change sets.
    let head: Int64
    let seconds: Int

    func measure() async throws -> LoadReport {
        var health: [HealthRow] = [], sync: [LoadRow] = []
        for connections in Self.connections {
            print("GET /health with \(connections) connections for \(seconds) s …")
            let ceiling = try await run(port: ports.cached, path: "/health", request: nil, connections: connections)
            health.append(HealthRow(connections: connections, run: ceiling))
            for lag in Self.lags where lag <= head {
                let body = "{\"maxRevision\":\(head - lag),\"changeSets\":[]}"
                // wrk counts only 4xx and 5xx as errors and reads no body: one request of our own first
                // makes sure each server answers 200 to exactly what wrk will send.
                for port in [ports.cached, ports.plain] {
                    _ = try await BenchClient(http: http, port: port).sync(token: reader, body: ByteBuffer(string: body))
                }
                let request = try syncRequest(body: body)
                print("POST /sync at lag \(lag) with \(connections) connections for \(seconds) s, each server …")
                let redis = try await run(port: ports.cached, path: "/sync", request: request, connections: connections)
                let postgres = try await run(port: ports.plain, path: "/sync", request: request, connections: connections)
                sync.append(LoadRow(connections: connections, lag: Int(lag), redis: redis, postgres: postgres))
            }
        }
        return LoadReport(seconds: seconds, threads: Self.threads, health: health, sync: sync)
    }

    private func run(port: Int, path: String, request: String?, connections: Int) async throws -> WrkRun {
        let run = try await wrk.run(
            url: "http://127.0.0.1:\(port)\(path)", script: (request ?? "") + Wrk.summary,
            threads: Self.threads, connections: connections, seconds: seconds)
        // wrk stops with a request under way on every connection, and the server finishes them after it has
        // gone: let them end, within about the slowest answer wrk saw, before the next run shares the cores.
        try await Task.sleep(for: .microseconds(Int64(min(run.latency.max, 5_000_000))) + .milliseconds(100))
        return run
    }

    /// The Lua that makes every wrk request the reader's catch-up.
    private func syncRequest(body: String) throws -> String {
        // Both go inside single-quoted Lua strings.
        guard !reader.contains(where: { $0 == "'" || $0 == "\\" || $0.isNewline }), !body.contains("'") else {
            throw BenchError("the reader's token or the body cannot be quoted for wrk's Lua")
        }
        return """
            wrk.method = "POST"
            wrk.body = '\(body)'
            wrk.headers["Authorization"] = 'Bearer \(reader)'
            wrk.headers["Accept-Encoding"] = "gzip"
            wrk.headers["Content-Type"] = "application/json"

            """
    }
}
