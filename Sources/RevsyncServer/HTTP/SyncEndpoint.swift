import Logging
import NIOCore
import RevsyncWire

/// Everything the server does for one `POST /sync` except HTTP framing: authenticate,
/// undo the body's encoding, decode, sync, and compress the answer when asked.
/// The controller calls it; the benchmark times it as the server-side cost.
public struct SyncEndpoint: Sendable {
    let authenticator: Authenticator
    let bodyReader: RequestBodyReader
    let service: SyncService

    /// - Returns: the response body, and whether it is gzip-compressed.
    public func respond(
        token: String?, body: ByteBuffer, contentEncoding: String?, acceptEncoding: String?, logger: Logger
    ) async throws -> (body: ByteBuffer, gzipped: Bool) {
        let device = try await authenticator.device(token: token)
        var logger = logger
        logger[metadataKey: "device.id"] = .string(device.publicId)
        let decoded = try bodyReader.decodeContent(body, encoding: contentEncoding)
        let request = try bodyReader.decode(SyncRequest.self, from: decoded)
        let response = try await service.sync(request, device: device, logger: logger)
        guard Gzip.accepted(acceptEncoding) else { return (response, false) }
        return (Gzip.deflate(response), true)
    }
}
