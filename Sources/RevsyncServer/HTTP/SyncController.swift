import Hummingbird
import RevsyncWire

/// `POST /sync`: the one endpoint devices exchange change sets through.
struct SyncController<Context: RequestContext>: Sendable {
    let endpoint: SyncEndpoint
    let perDevice: DeviceRequestCount

    func addRoutes(to router: Router<Context>) {
        router.post("/sync") { request, context in
            // Authenticate before reading the body, so an unknown caller gets nothing read or inflated;
            // `respond` authenticates again from the cache, so it stays complete on its own.
            let token = Authenticator.bearerToken(request)
            let device = try await endpoint.authenticator.device(token: token)
            guard perDevice.enter(device.id) else {
                throw SyncError(
                    .unavailable, "this device has \(perDevice.limit) requests under way already: send the next one when they are answered",
                    retryAfterSeconds: 1)
            }
            defer { perDevice.leave(device.id) }
            let raw = try await endpoint.bodyReader.collect(request)
            let (body, gzipped) = try await endpoint.respond(
                token: token, body: raw, contentEncoding: request.headers[.contentEncoding],
                acceptEncoding: request.headers[.acceptEncoding], logger: context.logger)
            var headers: HTTPFields = [.contentType: "application/json"]
            if gzipped {
                headers[.contentEncoding] = "gzip"
                headers[.vary] = "Accept-Encoding"
            }
            return Response(status: .ok, headers: headers, body: .init(byteBuffer: body))
        }
    }
}
