import AsyncHTTPClient
import Foundation
import NIOCore
import RevsyncWire

/// HTTP over loopback to one server, as a device sees it.
struct BenchClient: Sendable {
    let http: HTTPClient
    let port: Int

    func waitUntilHealthy() async throws {
        for _ in 0..<300 {
            if let response = try? await http.execute(HTTPClientRequest(url: "http://127.0.0.1:\(port)/health"), timeout: .seconds(1)),
                response.status == .ok
            {
                return
            }
            try await Task.sleep(for: .milliseconds(100))
        }
        throw BenchError("the server on port \(port) did not become healthy")
    }

    func register(_ name: String, role: String, adminToken: String) async throws -> String {
        var request = HTTPClientRequest(url: "http://127.0.0.1:\(port)/devices")
        request.method = .POST
        request.headers.add(name: "Authorization", value: "Bearer \(adminToken)")
        request.body = .bytes(ByteBuffer(bytes: try JSONEncoder().encode(DeviceRegistration(name: name, user: name, role: role))))
        let response = try await http.execute(request, timeout: .seconds(30))
        let body = try await response.body.collect(upTo: 1 << 20)
        guard response.status == .created else { throw BenchError("POST /devices answered \(response.status): \(String(buffer: body))") }
        return try JSONDecoder().decode(RegisteredDevice.self, from: Data(body.readableBytesView)).token
    }

    /// POSTs a sync body and returns the whole (possibly gzip) answer.
    func sync(token: String, body: ByteBuffer, gzip: Bool = true) async throws -> ByteBuffer {
        var request = HTTPClientRequest(url: "http://127.0.0.1:\(port)/sync")
        request.method = .POST
        request.headers.add(name: "Authorization", value: "Bearer \(token)")
        if gzip { request.headers.add(name: "Accept-Encoding", value: "gzip") }
        request.body = .bytes(body)
        let response = try await http.execute(request, timeout: .seconds(60))
        let answer = try await response.body.collect(upTo: 512 << 20)
        guard response.status == .ok else { throw BenchError("sync answered \(response.status): \(String(buffer: answer))") }
        return answer
    }

    func head(token: String) async throws -> Int64 {
        let answer = try await sync(token: token, body: ByteBuffer(string: "{\"maxRevision\":0,\"changeSets\":[]}"), gzip: false)
        var response = try JSONDecoder().decode(SyncResponse.self, from: Data(answer.readableBytesView))
        var position = response.maxRevision
        while response.more == true {
            let next = try await sync(token: token, body: ByteBuffer(string: "{\"maxRevision\":\(position),\"changeSets\":[]}"), gzip: false)
            response = try JSONDecoder().decode(SyncResponse.self, from: Data(next.readableBytesView))
            position = response.maxRevision
        }
        return position
    }
}

struct BenchError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
