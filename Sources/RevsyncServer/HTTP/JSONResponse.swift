import Foundation
import Hummingbird
import NIOCore
import RevsyncGzip

/// JSON responses, gzip-compressed when the client accepts it.
enum JSONResponse {
    static func make(_ body: ByteBuffer, status: HTTPResponse.Status = .ok, for request: Request) -> Response {
        var headers: HTTPFields = [.contentType: "application/json"]
        var body = body
        if Gzip.accepted(request.headers[.acceptEncoding]) {
            body = Gzip.deflate(body)
            headers[.contentEncoding] = "gzip"
            headers[.vary] = "Accept-Encoding"
        }
        return Response(status: status, headers: headers, body: .init(byteBuffer: body))
    }

    static func encode<T: Encodable>(_ value: T, status: HTTPResponse.Status = .ok, for request: Request) throws -> Response {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return make(ByteBuffer(bytes: try encoder.encode(value)), status: status, for: request)
    }
}
