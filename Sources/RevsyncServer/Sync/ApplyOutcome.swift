import NIOCore
import RevsyncRules
import RevsyncWire

/// What became of one change set of a request.
enum ApplyOutcome: Sendable {
    /// Committed now as `revision`, with the log entry exactly as stored.
    case applied(revision: Int64, seq: Int64?, entry: CommittedEntry)
    /// Rejected now; nothing of it was written.
    case rejected(ConflictReason, ChangeSet)
    /// Its seq was handled before and committed as `revision`.
    case repeated(revision: Int64, seq: Int64)
    /// Its seq was handled before and rejected; the stored change set gets a fresh corrective set.
    case repeatedRejection(ConflictReason, ChangeSet)

    var revision: Int64? {
        switch self {
        case .applied(let revision, _, _), .repeated(let revision, _): revision
        case .rejected, .repeatedRejection: nil
        }
    }
}

/// A pause inside each change set's transaction, after it took its revision and before it
/// commits: tests use it to widen the window in which concurrent writers overlap.
public typealias ApplyDelay = @Sendable () async -> Void

/// A committed change set's log entry, as PostgreSQL stored it.
public struct CommittedEntry: Sendable {
    public let revision: Int64
    /// The device that made it (internal id).
    public let deviceId: Int64
    /// The form every device receives.
    public let body: ByteBuffer
    /// The author's form, with `seq` and `__oldId__`.
    public let authorBody: ByteBuffer

    public init(revision: Int64, deviceId: Int64, body: ByteBuffer, authorBody: ByteBuffer) {
        self.revision = revision
        self.deviceId = deviceId
        self.body = body
        self.authorBody = authorBody
    }
}
