import Hummingbird
import RevsyncRules
import RevsyncWire

/// The device endpoints: registration and the lifecycle with an admin token, and
/// `GET /devices/me` for a device to learn what the server knows of it.
struct DeviceController<Context: RequestContext>: Sendable {
    let adminTokens: AdminTokens
    let devices: DeviceStore
    let authenticator: Authenticator
    let schema: DatasetSchema
    let bodyReader: RequestBodyReader
    /// Tells the other instances that a device changed (they drop their cached devices).
    let announce: @Sendable () async -> Void

    func addRoutes(to router: Router<Context>) {
        router.post("/devices") { request, context in
            try checkAdmin(request)
            let body = try await bodyReader.read(request)
            let registration = try bodyReader.decode(DeviceRegistration.self, from: body)
            for (field, value) in [("name", registration.name), ("user", registration.user)] {
                guard !value.isEmpty, value.count <= 200 else { throw SyncError(.invalidRequest, "\"\(field)\" must be 1 to 200 characters") }
                // PostgreSQL's text cannot hold U+0000 (found by schemathesis as a 500).
                guard !value.unicodeScalars.contains("\u{0}") else {
                    throw SyncError(.invalidRequest, "\"\(field)\" contains a NUL character (U+0000), which is not allowed")
                }
            }
            try checkRole(registration.role)
            let (device, deviceToken) = try await devices.register(name: registration.name, user: registration.user, role: registration.role)
            context.logger.info("device registered", metadata: ["device.id": .string(device.publicId), "role": .string(device.role)])
            return try JSONResponse.encode(RegisteredDevice(deviceId: device.publicId, token: deviceToken), status: .created, for: request)
        }
        router.get("/devices") { request, _ in
            try checkAdmin(request)
            return try JSONResponse.encode(DeviceList(devices: try await devices.list()), for: request)
        }
        router.get("/devices/me") { request, _ in
            let device = try await authenticator.device(for: request)
            return try JSONResponse.encode(try await devices.info(device), for: request)
        }
        router.delete("/devices/:id") { request, context in
            try checkAdmin(request)
            let id = try context.parameters.require("id")
            guard try await devices.revoke(publicId: id) else { throw Self.unknown(id) }
            await announce()
            context.logger.notice("device revoked", metadata: ["device.id": .string(id)])
            return Response(status: .noContent)
        }
        router.post("/devices/:id/token") { request, context in
            try checkAdmin(request)
            let id = try context.parameters.require("id")
            guard let token = try await devices.rotate(publicId: id) else { throw Self.unknown(id) }
            await announce()
            context.logger.notice("device token rotated", metadata: ["device.id": .string(id)])
            return try JSONResponse.encode(RegisteredDevice(deviceId: id, token: token), for: request)
        }
        router.patch("/devices/:id") { request, context in
            try checkAdmin(request)
            let id = try context.parameters.require("id")
            let update = try bodyReader.decode(DeviceUpdate.self, from: try await bodyReader.read(request))
            try checkRole(update.role)
            guard let info = try await devices.setRole(publicId: id, role: update.role) else { throw Self.unknown(id) }
            await announce()
            context.logger.notice("device role changed", metadata: ["device.id": .string(id), "role": .string(update.role)])
            return try JSONResponse.encode(info, for: request)
        }
    }

    private func checkAdmin(_ request: Request) throws {
        guard adminTokens.isConfigured else {
            throw SyncError(.forbidden, "device management is disabled: start the server with REVSYNC_ADMIN_TOKEN or REVSYNC_ADMIN_TOKEN_FILE set")
        }
        guard let token = Authenticator.bearerToken(request), try adminTokens.accepts(token) else {
            throw SyncError(.unauthorized, "managing devices needs \"Authorization: Bearer <admin token>\"")
        }
    }

    private func checkRole(_ role: String) throws {
        guard schema.roles.contains(role) else {
            throw SyncError(.invalidRequest, "role \"\(role)\" is unknown: use one of \(schema.roles.joined(separator: ", "))")
        }
    }

    private static func unknown(_ id: String) -> SyncError {
        SyncError(.notFound, "no active device has the id \(id): GET /devices lists them")
    }
}
