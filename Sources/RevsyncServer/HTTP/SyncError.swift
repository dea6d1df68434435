import Foundation
import Hummingbird
import NIOCore
import RevsyncRules
import RevsyncWire

/// An envelope error of the contract: an HTTP status and the JSON body `{"error", "message"}`.
public struct SyncError: Error, HTTPResponseError, CustomStringConvertible {
    public let code: ErrorCode
    public let message: String
    public var expected: Int64? = nil
    /// `seq_reused`: the lowest temporary id the device has used on the server.
    public var lowestTemporaryId: Int64? = nil
    /// `seq_reused`: the seq that named another change set.
    public var seq: Int64? = nil
    public var retryAfterSeconds: Int? = nil

    public init(_ code: ErrorCode, _ message: String, expected: Int64? = nil, lowestTemporaryId: Int64? = nil, retryAfterSeconds: Int? = nil) {
        self.code = code
        self.message = message
        self.expected = expected
        self.lowestTemporaryId = lowestTemporaryId
        self.retryAfterSeconds = retryAfterSeconds
    }

    public var status: HTTPResponse.Status { .init(code: code.status) }
    public var description: String { "\(code.rawValue): \(message)" }

    public func response(from request: Request, context: some RequestContext) throws -> Response {
        var headers: HTTPFields = [.contentType: "application/json"]
        if let retryAfterSeconds { headers[.retryAfter] = String(retryAfterSeconds) }
        let body = ErrorBody(error: code.rawValue, message: message, expected: expected, lowestTemporaryId: lowestTemporaryId, seq: seq)
        let data = try JSONEncoder().encode(body)
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: data)))
    }

    static func unavailable(_ message: String) -> SyncError {
        SyncError(.unavailable, message, retryAfterSeconds: 2)
    }

    /// The answer to a refusal of the rules.
    init(_ refusal: SyncRefusal) {
        self.init(refusal.code, refusal.message, expected: refusal.expected, lowestTemporaryId: refusal.lowestTemporaryId, retryAfterSeconds: refusal.retryAfterSeconds)
        seq = refusal.seq
    }

    /// The answer to a store that cannot do its work.
    init(_ error: StoreError) {
        switch error {
        case .unavailable(let message): self = .unavailable(message)
        case .inconsistent(let message): self.init(.internal, message)
        }
    }
}
