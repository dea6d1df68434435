import AsyncHTTPClient
import Foundation
import NIOCore
import RevsyncWire

/// The server's admin endpoints for devices, called with the admin token straight
/// on one instance (not through a link: the admin is not under test). A call that
/// gets no answer or a 5xx (an instance being killed, PostgreSQL restarting) is
/// tried again until `patience` runs out.
struct DeviceAdmin: Sendable {
    let baseURL: String
    let adminToken: String
    var patience: Duration = .seconds(20)
    var httpClient: HTTPClient = .shared

    /// `DELETE /devices/{id}`: from its 204 on, the device's token must be refused.
    func revoke(_ deviceId: String) async throws {
        let (status, body, retried) = try await send(.delete, "/devices/\(deviceId)")
        if status == 204 { return }
        // A retry after a lost answer may find the work done: the listing tells.
        if retried, try await devices().first(where: { $0.deviceId.lowercased() == deviceId.lowercased() })?.revoked != nil { return }
        throw SoakError("DELETE /devices/\(deviceId) answered \(status): \(body)")
    }

    /// `POST /devices/{id}/token`: the device's new token; from its answer on, the old one must be
    /// refused. A retry after a lost answer rotates again, and its token is the one that counts.
    func rotate(_ deviceId: String) async throws -> RegisteredDevice {
        let (status, body, _) = try await send(.post, "/devices/\(deviceId)/token")
        guard status == 200 || status == 201 else { throw SoakError("POST /devices/\(deviceId)/token answered \(status): \(body)") }
        return try decode(RegisteredDevice.self, body, "POST /devices/\(deviceId)/token")
    }

    /// `PATCH /devices/{id}` with `{"role": role}`.
    @discardableResult
    func setRole(_ deviceId: String, to role: String) async throws -> DeviceInfo {
        let (status, body, _) = try await send(.patch, "/devices/\(deviceId)", body: try JSONEncoder().encode(DeviceUpdate(role: role)))
        guard status == 200 else { throw SoakError("PATCH /devices/\(deviceId) answered \(status): \(body)") }
        return try decode(DeviceInfo.self, body, "PATCH /devices/\(deviceId)")
    }

    /// `GET /devices`.
    func devices() async throws -> [DeviceInfo] {
        let (status, body, _) = try await send(.get, "/devices")
        guard status == 200 else { throw SoakError("GET /devices answered \(status): \(body)") }
        return try decode(DeviceList.self, body, "GET /devices").devices
    }

    private func decode<T: Decodable>(_ type: T.Type, _ body: String, _ call: String) throws -> T {
        do {
            return try JSONDecoder().decode(type, from: Data(body.utf8))
        } catch {
            throw SoakError("\(call): the answer is not the contract's \(type): \(error): \(body.prefix(300))")
        }
    }

    /// The status and body of the first answer that is not a 5xx, and whether it took more than one try.
    private enum Method: String {
        case get = "GET", delete = "DELETE", patch = "PATCH", post = "POST"
    }

    private func send(_ method: Method, _ path: String, body: Data? = nil) async throws -> (Int, String, Bool) {
        let deadline = ContinuousClock.now + patience
        var attempts = 0
        var lastProblem = ""
        while true {
            attempts += 1
            var request = HTTPClientRequest(url: baseURL + path)
            switch method {
            case .get: request.method = .GET
            case .delete: request.method = .DELETE
            case .patch: request.method = .PATCH
            case .post: request.method = .POST
            }
            request.headers.add(name: "Authorization", value: "Bearer \(adminToken)")
            if let body {
                request.headers.add(name: "Content-Type", value: "application/json")
                request.body = .bytes(ByteBuffer(bytes: body))
            }
            do {
                let response = try await httpClient.execute(request, timeout: .seconds(10))
                let text = String(buffer: try await response.body.collect(upTo: 16 * 1024 * 1024))
                let status = Int(response.status.code)
                if status < 500 { return (status, text, attempts > 1) }
                lastProblem = "\(status): \(text.prefix(300))"
            } catch {
                lastProblem = "\(error)"
            }
            guard ContinuousClock.now < deadline else {
                throw SoakError("\(method.rawValue) \(path) on \(baseURL) got no usable answer in \(attempts) tries: \(lastProblem)")
            }
            try await Task.sleep(for: .milliseconds(500))
        }
    }
}
