/// The envelope error codes of the contract, with their HTTP status.
public enum ErrorCode: String, Sendable, Hashable, CaseIterable {
    case invalidJSON = "invalid_json"
    case invalidRequest = "invalid_request"
    case unauthorized
    case forbidden
    case notFound = "not_found"
    /// A path the server serves, under other methods (`Allow` names them).
    case methodNotAllowed = "method_not_allowed"
    case sequenceGap = "sequence_gap"
    case seqReused = "seq_reused"
    case revisionAhead = "revision_ahead"
    case snapshotRequired = "snapshot_required"
    /// The database went back (restored from a backup, or failed over with commits lost):
    /// the revisions the device holds may not be the database's.
    case historyChanged = "history_changed"
    case tooLarge = "too_large"
    case unsupportedEncoding = "unsupported_encoding"
    /// A `Range` of `GET /snapshot` past the end of the file.
    case rangeNotSatisfiable = "range_not_satisfiable"
    case unavailable
    case `internal`

    public var status: Int {
        switch self {
        case .invalidJSON, .invalidRequest: 400
        case .unauthorized: 401
        case .forbidden: 403
        case .notFound: 404
        case .methodNotAllowed: 405
        case .sequenceGap, .seqReused, .revisionAhead, .historyChanged: 409
        case .snapshotRequired: 410
        case .tooLarge: 413
        case .unsupportedEncoding: 415
        case .rangeNotSatisfiable: 416
        case .unavailable: 503
        case .internal: 500
        }
    }
}
