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
        router.post("/sync") { request, context in try await sync(request, context: context) }
    }

    // The synchronous steps are functions of their own: an async function's frame holds the
    // locals of everything inlined into it, and the connection's task keeps the high-water
    // mark of its frames for as long as the connection lives (a waiting device's included).
    private func sync(_ request: Request, context: RevsyncRequestContext) async throws -> Response {
        let device = try await authenticator.device(for: request)
        try enter(device)
        // A request its connection holds (`ParkedSyncHandler`) leaves when it is answered.
        var heldByConnection = false
        defer { if !heldByConnection { perDevice.leave(device.id) } }
        let raw = try await bodyReader.collect(request)
        let decoded = try decode(raw, request: request, device: device, logger: context.logger)
        let answer = try await service.exchange(
            decoded.request, device: device, gzip: decoded.gzip, stillAuthorized: decoded.stillAuthorized, logger: decoded.logger)
        let body: ByteBuffer
        switch answer {
        case .ready(let ready):
            body = ready
        case .waiting(let pending):
            // The connection holds the waiting request and this task ends: the response
            // returned here gives the answer its head, and the answer is written when the wait ends.
            let park = park(pending, device: device, context: context)
            try? await context.channel.triggerUserOutboundEvent(park).get()
            if park.isAccepted {
                heldByConnection = true
                context.held.hold()
                return Self.response(nil, gzipped: decoded.gzip)
            }
            body = try await pending.answer(clientGone: context.channel.closeFuture)
        }
        return Self.response(body, gzipped: decoded.gzip)
    }

    @inline(never)
    private func enter(_ device: Device) throws {
        guard perDevice.enter(device.id) else {
            throw SyncError(
                .unavailable, "this device has \(perDevice.limit) requests under way already: send the next one when they are answered",
                retryAfterSeconds: 1)
        }
    }

    private struct Decoded {
        let request: SyncRequest
        let gzip: Bool
        let logger: Logger
        let stillAuthorized: @Sendable () async throws -> Void
    }

    @inline(never)
    private func decode(_ raw: ByteBuffer, request: Request, device: Device, logger: Logger) throws -> Decoded {
        var logger = logger
        logger[metadataKey: "device.id"] = .string(device.publicId)
        let decoded = try bodyReader.decodeSyncRequest(from: try bodyReader.decodeContent(raw, encoding: request.headers[.contentEncoding]))
        return Decoded(
            request: decoded, gzip: Gzip.accepted(request.headers[.acceptEncoding]), logger: logger,
            stillAuthorized: { [authenticator, token = Authenticator.bearerToken(request)] in _ = try await authenticator.device(token: token) })
    }

    @inline(never)
    private func park(_ pending: PendingSync, device: Device, context: RevsyncRequestContext) -> ParkSync {
        let held = context.held
        return ParkSync(pending: pending) { [perDevice] status in
            perDevice.leave(device.id)
            held.answered(status: status)
        }
    }

    /// The answer's response; a nil body for a request its connection holds (the answer comes later).
    @inline(never)
    private static func response(_ body: ByteBuffer?, gzipped: Bool) -> Response {
        var headers: HTTPFields = [.contentType: "application/json"]
        if gzipped {
            headers[.contentEncoding] = "gzip"
            headers[.vary] = "Accept-Encoding"
        }
        guard let body else { return Response(status: .ok, headers: headers) }
        return Response(status: .ok, headers: headers, body: .init(byteBuffer: body))
    }

    /// The exchange of an authenticated device without HTTP framing: undo the body's encoding,
    /// decode, sync, and compress the answer when asked (the benchmark times this as the server's cost).
    /// A request that waits for a commit holds the calling task.
    /// - Returns: the response body, and whether it is gzip-compressed.
    /// - Parameters:
    ///   - clientGone: completes when the client closes the connection (a waiting request then ends).
    ///   - stillAuthorized: throws when the device was revoked while its request waited.
    public func respond(
        device: Device, body: ByteBuffer, contentEncoding: String?, acceptEncoding: String?, clientGone: EventLoopFuture<Void>? = nil,
        stillAuthorized: (@Sendable () async throws -> Void)? = nil, logger: Logger
    ) async throws -> (body: ByteBuffer, gzipped: Bool) {
        let (answer, gzipped) = try await exchange(
            device: device, body: body, contentEncoding: contentEncoding, acceptEncoding: acceptEncoding,
            stillAuthorized: stillAuthorized, logger: logger)
        switch answer {
        case .ready(let ready): return (ready, gzipped)
        case .waiting(let pending): return (try await pending.answer(clientGone: clientGone), gzipped)
        }
    }

    private func exchange(
        device: Device, body: ByteBuffer, contentEncoding: String?, acceptEncoding: String?,
        stillAuthorized: (@Sendable () async throws -> Void)?, logger: Logger
    ) async throws -> (answer: SyncAnswer, gzipped: Bool) {
        var logger = logger
        logger[metadataKey: "device.id"] = .string(device.publicId)
        let request = try bodyReader.decodeSyncRequest(from: try bodyReader.decodeContent(body, encoding: contentEncoding))
        let gzip = Gzip.accepted(acceptEncoding)
        return (try await service.exchange(request, device: device, gzip: gzip, stillAuthorized: stillAuthorized, logger: logger), gzip)
    }
}
