import Hummingbird
import RevsyncRules
import RevsyncWire

/// `POST /devices`: registration with the admin token.
struct DeviceController<Context: RequestContext>: Sendable {
    let adminToken: String?
    let devices: DeviceStore
    let schema: DatasetSchema
    let bodyReader: RequestBodyReader

    func addRoutes(to router: Router<Context>) {
        router.post("/devices") { request, context in
            guard let adminToken else {
                throw SyncError(.forbidden, "device registration is disabled: start the server with REVSYNC_ADMIN_TOKEN set")
            }
            guard let token = Authenticator.bearerToken(request), DeviceStore.constantTimeEqual(token, adminToken) else {
                throw SyncError(.unauthorized, "registering a device needs \"Authorization: Bearer <admin token>\"")
            }
            let body = try await bodyReader.read(request)
            let registration = try bodyReader.decode(DeviceRegistration.self, from: body)
            for (field, value) in [("name", registration.name), ("user", registration.user)] where value.isEmpty || value.count > 200 {
                throw SyncError(.invalidRequest, "\"\(field)\" must be 1 to 200 characters")
            }
            guard schema.roles.contains(registration.role) else {
                throw SyncError(.invalidRequest, "role \"\(registration.role)\" is unknown: use one of \(schema.roles.joined(separator: ", "))")
            }
            let (device, deviceToken) = try await devices.register(name: registration.name, user: registration.user, role: registration.role)
            context.logger.info("device registered", metadata: ["device.id": .string(device.publicId), "role": .string(device.role)])
            return try JSONResponse.encode(RegisteredDevice(deviceId: device.publicId, token: deviceToken), status: .created, for: request)
        }
    }
}
