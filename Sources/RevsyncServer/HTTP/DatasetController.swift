import Hummingbird
import NIOCore
import RevsyncGzip
import RevsyncRules

/// `GET /schema` and `GET /snapshot`: what a new device needs before its first sync.
struct DatasetController<Context: RequestContext>: Sendable {
    let authenticator: Authenticator
    let schema: DatasetSchema
    let snapshots: SnapshotStreamer

    func addRoutes(to router: Router<Context>) {
        router.get("/schema") { request, _ in
            let device = try await authenticator.device(for: request)
            return try JSONResponse.encode(schema.document(for: device.role), for: request)
        }
        router.get("/snapshot") { request, context in
            var context = context
            let device = try await authenticator.device(for: request)
            context.logger[metadataKey: "device.id"] = .string(device.publicId)
            let gzip = Gzip.accepted(request.headers[.acceptEncoding])
            var headers: HTTPFields = [.contentType: "application/json"]
            if gzip {
                headers[.contentEncoding] = "gzip"
                headers[.vary] = "Accept-Encoding"
            }
            let snapshots = self.snapshots
            let body = ResponseBody { writer in
                if gzip {
                    let stream = try GzipStream()
                    try await snapshots.stream { chunk in
                        for part in try stream.compress(chunk) { try await writer.write(part) }
                    }
                    for part in try stream.finish() { try await writer.write(part) }
                } else {
                    try await snapshots.stream { chunk in try await writer.write(chunk) }
                }
                try await writer.finish(nil)
            }
            return Response(status: .ok, headers: headers, body: body)
        }
    }
}
