import RevsyncWire

/// How the engine talks to the Revsync server. `HTTPSyncTransport` is the real
/// one; `FaultInjectingTransport` wraps any transport to lose responses or fail
/// calls on purpose in tests.
///
/// Every method either returns the decoded body or throws a `SyncTransportError`
/// (or `CancellationError`).
public protocol SyncTransport: Sendable {
    /// `POST /sync`.
    func sync(_ request: SyncRequest, token: String) async throws -> SyncResponse
    /// `GET /snapshot`: one change set of creates at a consistent revision.
    func snapshot(token: String) async throws -> SyncResponse
    /// `GET /schema`, with the calling device's permissions.
    func schema(token: String) async throws -> SchemaDocument
    /// `POST /devices` with the admin token.
    func register(_ registration: DeviceRegistration, adminToken: String) async throws -> RegisteredDevice
    /// `GET /devices/me`: what the server knows of the calling device, notably the
    /// highest `seq` it has handled and the lowest temporary id it has mapped.
    func device(token: String) async throws -> DeviceInfo
    /// `GET /snapshot` as a SQLite file (`Accept: application/vnd.sqlite3`), downloaded
    /// to `path`, resuming what an interrupted call left beside it, and checked against
    /// the digest the server sent. Nil when the server does not offer one, or offers one
    /// older than `minimumRevision` (the device's own revision: loading it would take the
    /// device back in time): load `snapshot(token:)` instead. A failed download throws
    /// (retryable errors keep what has arrived, for the next call to resume).
    func snapshotFile(token: String, to path: String, minimumRevision: Int64) async throws -> SnapshotFileDownload?
}

extension SyncTransport {
    /// For transports written before `GET /devices/me` existed: answers as a server
    /// without the endpoint does (404), so the engine relies on `seq_reused` alone.
    /// A transport that wraps another should forward the call instead.
    public func device(token: String) async throws -> DeviceInfo {
        throw SyncTransportError.rejected(status: 404, code: "not_found", message: "this transport does not implement GET /devices/me")
    }
}

extension SyncTransport {
    /// For transports without SQLite snapshots (the tests' in-memory server, say): the
    /// engine loads the JSON snapshot. A transport that wraps another should forward the call.
    public func snapshotFile(token: String, to path: String, minimumRevision: Int64) async throws -> SnapshotFileDownload? {
        nil
    }
}

/// A SQLite snapshot file downloaded whole and matching the server's digest.
public struct SnapshotFileDownload: Sendable, Hashable {
    public var path: String
    /// The revision and schema version the server says the file is at.
    public var revision: Int64
    public var schemaVersion: Int
    /// SHA-256 of the file, lowercase hex.
    public var digest: String
    /// The server's tag for the bytes as they were sent (the gzip copy's, when compressed).
    public var etag: String
    /// The file's size, and the bytes this call received (less when it resumed; gzip counts as sent).
    public var bytes: Int
    public var receivedBytes: Int
    /// Whether this call continued an earlier, interrupted one.
    public var resumed: Bool
    /// The device's last seq the server had handled when it answered (`Revsync-Device-Last-Seq`,
    /// read after the file's records): its pending change sets through it are not replayed over
    /// the file. Nil from a server without it.
    public var lastSeq: Int64?

    public init(
        path: String, revision: Int64, schemaVersion: Int, digest: String, etag: String, bytes: Int, receivedBytes: Int, resumed: Bool,
        lastSeq: Int64? = nil
    ) {
        self.path = path
        self.revision = revision
        self.schemaVersion = schemaVersion
        self.digest = digest
        self.etag = etag
        self.bytes = bytes
        self.receivedBytes = receivedBytes
        self.resumed = resumed
        self.lastSeq = lastSeq
    }
}

/// A failed exchange with the server, by what the device should do about it.
public enum SyncTransportError: Error, Sendable, Hashable, CustomStringConvertible {
    /// 401: the token is missing or unknown. Not retried.
    case unauthorized(message: String)
    /// 409 `sequence_gap`: the server wants `expected` as the next `seq`.
    case sequenceGap(expected: Int64, message: String)
    /// 409 `seq_reused`: a change set of the request reuses a `seq` the server has
    /// already handled for other content (the device's file is older than what the
    /// server has seen: restored from a backup, or an old copy given the token).
    /// `expected` is the next `seq` the server expects; `lowestTemporaryId` the lowest
    /// temporary id it has mapped for the device (0 for none); `firstReused` the first
    /// seq of the request that named other content (nil from a server that does not say).
    /// Nothing was applied.
    case seqReused(expected: Int64, lowestTemporaryId: Int64, firstReused: Int64? = nil, message: String)
    /// 409 `revision_ahead`: the device claims a revision the server does not have
    /// (the server's data was reset): the device bootstraps again.
    case revisionAhead(message: String)
    /// 409 `history_changed`: the server's database went back (restored from a backup, or
    /// failed over) since the device last synced; the revisions it holds may not be the
    /// database's: bootstrap again, from any revision. Also raised by the device itself for an
    /// answer of another history than its request named (`ResponseApplier.checkHistory`).
    case historyChanged(message: String)
    /// 410 `snapshot_required`: the device is behind the retained log: bootstrap again.
    case snapshotRequired(message: String)
    /// 413 `too_large`: send fewer change sets. `byServer` is false for a 413 without the
    /// server's own `too_large` body (a proxy's limit): a lone change set refused that way is
    /// not the change set's fault, and is not dropped (`UndeliverableChangeSet`).
    case tooLarge(message: String, byServer: Bool = true)
    /// 415 `unsupported_encoding`.
    case unsupportedEncoding(message: String)
    /// 503 `unavailable`, with the server's Retry-After when it gave one.
    case unavailable(retryAfter: Duration?, message: String)
    /// Another 4xx (`invalid_json`, `invalid_request`, `forbidden`, …): a bug, not retried.
    case rejected(status: Int, code: String, message: String)
    /// Another 5xx: retried.
    case serverError(status: Int, message: String)
    /// No answer: connection refused or reset, timeout, DNS. The request may or
    /// may not have reached the server; retrying with the same `seq`s is safe.
    case connection(String)
    /// An answer that is not what the contract says (bad JSON, bad gzip, cut short). Retried.
    case invalidResponse(String)

    /// Whether the same call may simply be made again after a pause.
    public var isRetryable: Bool {
        switch self {
        case .unavailable, .serverError, .connection, .invalidResponse: true
        default: false
        }
    }

    /// The pause the server asked for.
    public var retryAfter: Duration? {
        if case .unavailable(let retryAfter, _) = self { return retryAfter }
        return nil
    }

    public var description: String {
        switch self {
        case .unauthorized(let message): "401 unauthorized: \(message)"
        case .sequenceGap(let expected, let message): "409 sequence_gap (expected \(expected)): \(message)"
        case .seqReused(let expected, let lowest, _, let message):
            "409 seq_reused (expected \(expected), lowest temporary id \(lowest)): \(message)"
        case .revisionAhead(let message): "409 revision_ahead: \(message)"
        case .historyChanged(let message): "409 history_changed: \(message)"
        case .snapshotRequired(let message): "410 snapshot_required: \(message)"
        case .tooLarge(let message, let byServer): "413 \(byServer ? "too_large" : "(not the server's own answer)"): \(message)"
        case .unsupportedEncoding(let message): "415 unsupported_encoding: \(message)"
        case .unavailable(_, let message): "503 unavailable: \(message)"
        case .rejected(let status, let code, let message): "\(status) \(code): \(message)"
        case .serverError(let status, let message): "\(status): \(message)"
        case .connection(let message): "connection failed: \(message)"
        case .invalidResponse(let message): "invalid response: \(message)"
        }
    }
}
