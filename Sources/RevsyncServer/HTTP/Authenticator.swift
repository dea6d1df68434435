import Hummingbird

/// Finds the device behind a request's bearer token.
struct Authenticator: Sendable {
    let devices: DeviceStore

    func device(for request: Request) async throws -> Device {
        try await device(token: Self.bearerToken(request))
    }

    func device(token: String?) async throws -> Device {
        guard let token else {
            throw SyncError(.unauthorized, "send the device token as \"Authorization: Bearer <token>\"")
        }
        guard let device = try await devices.authenticate(token: token) else {
            throw SyncError(.unauthorized, "the token is not known: register the device with POST /devices")
        }
        return device
    }

    static func bearerToken(_ request: Request) -> String? {
        guard let header = request.headers[.authorization] else { return nil }
        let parts = header.split(separator: " ", maxSplits: 1)
        guard parts.count == 2, parts[0].lowercased() == "bearer" else { return nil }
        let token = parts[1].trimmingHTTPWhitespace
        return token.isEmpty ? nil : String(token)
    }
}
