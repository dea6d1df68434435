import RevsyncRules
import RevsyncWire

/// What became of one change set of a request.
enum ApplyOutcome: Sendable {
    /// Committed now as `revision`.
    case applied(revision: Int64, seq: Int64?)
    /// Rejected now; nothing of it was written.
    case rejected(ConflictReason, ChangeSet)
    /// Its seq was handled before and committed as `revision`.
    case repeated(revision: Int64, seq: Int64)
    /// Its seq was handled before and rejected; the stored change set gets a fresh corrective set.
    case repeatedRejection(ConflictReason, ChangeSet)

    var revision: Int64? {
        switch self {
        case .applied(let revision, _), .repeated(let revision, _): revision
        case .rejected, .repeatedRejection: nil
        }
    }
}

/// A pause inside each change set's transaction, just before the revision lock:
/// tests use it to widen the window in which concurrent writers overlap.
public typealias ApplyDelay = @Sendable () async -> Void
