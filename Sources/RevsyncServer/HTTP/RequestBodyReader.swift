import Foundation
import Hummingbird
import NIOCore
import RevsyncGzip
import RevsyncWire

/// Reads a request body within the limits and undoes its `Content-Encoding`.
struct RequestBodyReader: Sendable {
    let limits: ServerSettings.Limits

    /// The body as sent (within the size limit), with its `Content-Encoding` undone.
    func read(_ request: Request) async throws -> ByteBuffer {
        try decodeContent(try await collect(request), encoding: request.headers[.contentEncoding])
    }

    /// The body as sent, refused as soon as it passes the size limit.
    func collect(_ request: Request) async throws -> ByteBuffer {
        if let length = request.headers[.contentLength].flatMap(Int.init), length > limits.maxBodyBytes {
            throw SyncError(.tooLarge, "the body has \(length) bytes; the limit is \(limits.maxBodyBytes)")
        }
        var body = ByteBuffer()
        for try await chunk in request.body {
            guard body.readableBytes + chunk.readableBytes <= limits.maxBodyBytes else {
                throw SyncError(.tooLarge, "the body is over the limit of \(limits.maxBodyBytes) bytes")
            }
            var chunk = chunk
            body.writeBuffer(&chunk)
        }
        return body
    }

    /// Undoes a `Content-Encoding` within the inflate limit.
    func decodeContent(_ body: ByteBuffer, encoding header: String?) throws -> ByteBuffer {
        if body.readableBytes > limits.maxBodyBytes {
            throw SyncError(.tooLarge, "the body is over the limit of \(limits.maxBodyBytes) bytes")
        }
        let encoding = header?.trimmingCharacters(in: .whitespaces).lowercased() ?? "identity"
        switch encoding {
        case "identity", "":
            return body
        case "gzip", "x-gzip":
            do {
                return try Gzip.inflate(body, maxSize: limits.maxInflatedBytes)
            } catch .tooLarge {
                throw SyncError(.tooLarge, "the body inflates to more than \(limits.maxInflatedBytes) bytes")
            } catch .corrupt {
                throw SyncError(.unsupportedEncoding, "the body is not complete, valid gzip")
            }
        default:
            throw SyncError(.unsupportedEncoding, "Content-Encoding \"\(encoding)\" is not supported: use gzip or identity")
        }
    }

    /// A `/sync` body: its usual shape read straight from the bytes (`SyncRequestReader`), anything
    /// else, errors included, by `decode`.
    func decodeSyncRequest(from body: ByteBuffer) throws -> SyncRequest {
        try JSONDepth.check(body, limit: limits.maxJSONDepth)
        if let request = body.withUnsafeReadableBytes({ SyncRequestReader.read($0) }) { return request }
        return try decode(SyncRequest.self, from: body)
    }

    /// Decodes JSON after checking its nesting depth, mapping failures to the contract's 400s.
    func decode<T: Decodable>(_ type: T.Type, from body: ByteBuffer) throws -> T {
        try JSONDepth.check(body, limit: limits.maxJSONDepth)
        do {
            return try JSONDecoder().decode(T.self, from: Data(body.readableBytesView))
        } catch let error as DecodingError {
            throw Self.describe(error)
        }
    }

    static func describe(_ error: DecodingError) -> SyncError {
        func path(_ keys: [any CodingKey]) -> String {
            keys.isEmpty ? "the top level" : keys.map { $0.intValue.map { "[\($0)]" } ?? ".\($0.stringValue)" }.joined()
        }
        switch error {
        case .dataCorrupted(let context) where context.codingPath.isEmpty:
            return SyncError(.invalidJSON, "the body is not valid JSON")
        case .dataCorrupted(let context):
            return SyncError(.invalidRequest, "\(context.debugDescription) at \(path(context.codingPath))")
        case .keyNotFound(let key, let context):
            return SyncError(.invalidRequest, "missing \"\(key.stringValue)\" at \(path(context.codingPath))")
        case .typeMismatch(let type, let context):
            return SyncError(.invalidRequest, "wrong type at \(path(context.codingPath)): expected \(type)")
        case .valueNotFound(let type, let context):
            return SyncError(.invalidRequest, "missing value at \(path(context.codingPath)): expected \(type)")
        @unknown default:
            return SyncError(.invalidRequest, "\(error)")
        }
    }
}

/// Measures how deeply arrays and objects nest, before a decoder recurses into them.
enum JSONDepth {
    static func check(_ body: ByteBuffer, limit: Int) throws {
        var depth = 0, inString = false, escaped = false
        for byte in body.readableBytesView {
            if inString {
                if escaped { escaped = false } else if byte == UInt8(ascii: "\\") { escaped = true } else if byte == UInt8(ascii: "\"") { inString = false }
                continue
            }
            switch byte {
            case UInt8(ascii: "\""): inString = true
            case UInt8(ascii: "["), UInt8(ascii: "{"):
                depth += 1
                if depth > limit { throw SyncError(.invalidRequest, "JSON nests deeper than \(limit) levels") }
            case UInt8(ascii: "]"), UInt8(ascii: "}"): depth -= 1
            default: break
            }
        }
    }
}
