import Foundation
import Hummingbird
import NIOCore
import RevsyncRules
import RevsyncWire

/// An envelope error as HTTP sends it: the status of its code and the JSON body
/// `{"error", "message", …}`. What it says is a `SyncRefusal`, whether the rules, a store
/// (`StoreError`) or the HTTP layer itself (limits, bodies, routes) refused the request.
public struct SyncError: Error, HTTPResponseError, CustomStringConvertible {
    public let refusal: SyncRefusal
    /// The methods a `405 method_not_allowed` names in `Allow`.
    var allowedMethods: [String] = []

    public init(_ refusal: SyncRefusal) { self.refusal = refusal }

    public init(_ code: ErrorCode, _ message: String, expected: Int64? = nil, lowestTemporaryId: Int64? = nil, retryAfterSeconds: Int? = nil) {
        var refusal = SyncRefusal(code, message, expected: expected, retryAfterSeconds: retryAfterSeconds)
        refusal.lowestTemporaryId = lowestTemporaryId
        self.refusal = refusal
    }

    /// The answer to a store that cannot do its work.
    init(_ error: StoreError) {
        switch error {
        case .unavailable(let message): self = .unavailable(message)
        case .inconsistent(let message): self.init(.internal, message)
        }
    }

    static func unavailable(_ message: String) -> SyncError {
        SyncError(.unavailable, message, retryAfterSeconds: 2)
    }

    public var code: ErrorCode { refusal.code }
    public var message: String { refusal.message }
    public var status: HTTPResponse.Status { .init(code: code.status) }
    public var description: String { refusal.description }

    /// The contract's error body.
    public var body: ErrorBody {
        ErrorBody(error: code.rawValue, message: message, expected: refusal.expected, lowestTemporaryId: refusal.lowestTemporaryId, seq: refusal.seq)
    }

    /// The answer to any error a request's handling threw: the contract's refusals as they are,
    /// anything else as `500 internal`.
    init(answering error: any Error) {
        switch error {
        case let error as SyncError: self = error
        case let refusal as SyncRefusal: self.init(refusal)
        case let error as StoreError: self.init(error)
        default: self.init(.internal, "the server failed to handle this request")
        }
    }

    var headers: HTTPFields {
        var headers: HTTPFields = [.contentType: "application/json"]
        if let seconds = refusal.retryAfterSeconds { headers[.retryAfter] = String(seconds) }
        if !allowedMethods.isEmpty { headers[.allow] = allowedMethods.joined(separator: ", ") }
        return headers
    }

    /// The body as JSON, with slashes as they are (messages name paths, `/sync`, which
    /// `JSONEncoder` would write `\/` by default: valid, but hard to read) and its keys in one
    /// order, `error` first (by default their order changed from one answer to the next).
    var json: Data {
        get throws {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.withoutEscapingSlashes, .sortedKeys]
            return try encoder.encode(body)
        }
    }

    public func response(from request: Request, context: some RequestContext) throws -> Response {
        Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: try json)))
    }
}
