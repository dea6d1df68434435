import Foundation
import RevsyncWire

/// Turns a non-2xx answer into a `SyncTransportError`, from the contract's error body.
enum ErrorResponseMapper {
    static func error(status: Int, body: [UInt8], retryAfter: String?) -> SyncTransportError {
        let parsed = try? JSONDecoder().decode(ErrorBody.self, from: Data(body))
        let message = parsed?.message ?? String(decoding: body.prefix(500), as: UTF8.self)
        let code = parsed.flatMap { ErrorCode(rawValue: $0.error) }
        switch (status, code) {
        case (401, _), (_, .unauthorized?):
            return .unauthorized(message: message)
        case (_, .sequenceGap?):
            guard let expected = parsed?.expected else {
                return .invalidResponse("sequence_gap without \"expected\": \(message)")
            }
            return .sequenceGap(expected: expected, message: message)
        case (_, .seqReused?):
            // Both numbers are needed to repair: without them the answer is broken (and retried).
            guard let expected = parsed?.expected, let lowest = parsed?.lowestTemporaryId else {
                return .invalidResponse("seq_reused without \"expected\" or \"lowestTemporaryId\": \(message)")
            }
            return .seqReused(expected: expected, lowestTemporaryId: lowest, firstReused: parsed?.seq, message: message)
        case (_, .revisionAhead?):
            return .revisionAhead(message: message)
        case (_, .historyChanged?):
            return .historyChanged(message: message)
        case (410, _), (_, .snapshotRequired?):
            return .snapshotRequired(message: message)
        case (_, .tooLarge?):
            return .tooLarge(message: message)
        case (413, _):
            // A proxy's limit, in its own words (an HTML page, say).
            return .tooLarge(message: message, byServer: false)
        case (415, _), (_, .unsupportedEncoding?):
            return .unsupportedEncoding(message: message)
        case (503, _), (_, .unavailable?):
            return .unavailable(retryAfter: retryAfter.flatMap(parseRetryAfter), message: message)
        case (500..., _):
            return .serverError(status: status, message: message)
        default:
            return .rejected(status: status, code: parsed?.error ?? "http_\(status)", message: message)
        }
    }

    /// The longest `Retry-After` obeyed, in seconds: a round holds the sync slot while it
    /// waits (local edits and `syncOnce()` wait behind it), and the server asks for 1 or 2 s;
    /// a proxy's hour, or a value past what a `Duration` can hold, is cut to this.
    static let longestRetryAfter: Int64 = 300

    /// Retry-After in seconds (the HTTP-date form is not used by the server), at most `longestRetryAfter`.
    static func parseRetryAfter(_ text: String) -> Duration? {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        if let seconds = Int64(trimmed), seconds >= 0 { return .seconds(min(seconds, longestRetryAfter)) }
        if let seconds = Double(trimmed), seconds >= 0, seconds.isFinite {
            return .milliseconds(Int64(min(seconds, Double(longestRetryAfter)) * 1000))
        }
        return nil
    }
}
