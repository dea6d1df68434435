import Hummingbird
import Logging
import NIOCore
import RevsyncGzip
import RevsyncWire

/// `POST /sync`: the one endpoint devices exchange change sets through. It authenticates
/// once (before reading the body, so an unknown caller gets nothing read or inflated),
/// decodes, and hands the exchange to the `SyncService`.
public struct SyncController: Sendable {
    let authenticator: Authenticator
    let bodyReader: RequestBodyReader
    let service: SyncService
    let perDevice: DeviceRequestCount

    func addRoutes(to router: Router<RevsyncRequestContext>) {
        router.post("/sync") { request, context in
            let device = try await authenticator.device(for: request)
            guard perDevice.enter(device.id) else {
                throw SyncError(
                    .unavailable, "this device has \(perDevice.limit) requests under way already: send the next one when they are answered",
                    retryAfterSeconds: 1)
            }
            defer { perDevice.leave(device.id) }
            let raw = try await bodyReader.collect(request)
            let (body, gzipped) = try await respond(
                device: device, body: raw, contentEncoding: request.headers[.contentEncoding],
                acceptEncoding: request.headers[.acceptEncoding], clientGone: context.channel.closeFuture,
                stillAuthorized: { _ = try await authenticator.device(for: request) }, logger: context.logger)
            var headers: HTTPFields = [.contentType: "application/json"]
            if gzipped {
                headers[.contentEncoding] = "gzip"
                headers[.vary] = "Accept-Encoding"
            }
            return Response(status: .ok, headers: headers, body: .init(byteBuffer: body))
        }
    }

    /// The exchange of an authenticated device without HTTP framing: undo the body's encoding,
    /// decode, sync, and compress the answer when asked (the benchmark times this as the server's cost).
    /// - Returns: the response body, and whether it is gzip-compressed.
    /// - Parameters:
    ///   - clientGone: completes when the client closes the connection (a waiting request then ends).
    ///   - stillAuthorized: throws when the device was revoked while its request waited.
    public func respond(
        device: Device, body: ByteBuffer, contentEncoding: String?, acceptEncoding: String?, clientGone: EventLoopFuture<Void>? = nil,
        stillAuthorized: (@Sendable () async throws -> Void)? = nil, logger: Logger
    ) async throws -> (body: ByteBuffer, gzipped: Bool) {
        var logger = logger
        logger[metadataKey: "device.id"] = .string(device.publicId)
        let request = try bodyReader.decode(SyncRequest.self, from: try bodyReader.decodeContent(body, encoding: contentEncoding))
        let gzip = Gzip.accepted(acceptEncoding)
        return (try await service.sync(request, device: device, gzip: gzip, clientGone: clientGone, stillAuthorized: stillAuthorized, logger: logger), gzip)
    }
}
