import Hummingbird
import RevsyncWire

/// `POST /sync`: the one endpoint devices exchange change sets through.
struct SyncController<Context: RequestContext>: Sendable {
    let authenticator: Authenticator
    let bodyReader: RequestBodyReader
    let service: SyncService

    func addRoutes(to router: Router<Context>) {
        router.post("/sync") { request, context in
            var context = context
            let device = try await authenticator.device(for: request)
            context.logger[metadataKey: "device.id"] = .string(device.publicId)
            let body = try await bodyReader.read(request)
            let syncRequest = try bodyReader.decode(SyncRequest.self, from: body)
            let response = try await service.sync(syncRequest, device: device, logger: context.logger)
            return JSONResponse.make(response, for: request)
        }
    }
}
