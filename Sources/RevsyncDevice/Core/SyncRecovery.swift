/// What the sync loop does after a failed `/sync` call.
public enum SyncRecovery: Sendable, Hashable {
    /// Pause (the server's Retry-After, else the backoff) and send again: same `seq`s, so safe.
    case retry(after: Duration?)
    /// Load a fresh snapshot (pending changes kept), then send again.
    case bootstrap
    /// The server's database went back: load a fresh snapshot whatever its revision (the
    /// device's own revision is of another line), pending changes kept, then send again.
    case bootstrapAnyRevision
    /// Renumber the pending change sets from `expected`, then send again.
    case renumber(expected: Int64)
    /// Find the first pending change set the server refuses as another one's `seq`
    /// (`ReusedSeqSearch`), renumber it and every later one from `expected` with
    /// their created records given temporary ids below `lowestTemporaryId`
    /// (`ReusedSeqRepair`), then send again. `firstReused` is the seq the server named
    /// as the first one of the request that reuses a seq, which ends the search at once.
    case repairReusedSeqs(expected: Int64, lowestTemporaryId: Int64, firstReused: Int64? = nil)
    /// Send fewer change sets.
    case shrinkBatch
    /// Stop and throw: retrying cannot help.
    case fail

    /// The decision for `error` on a request that carried `changeSetCount` change sets.
    public static func decide(for error: SyncTransportError, changeSetCount: Int) -> SyncRecovery {
        switch error {
        case .snapshotRequired, .revisionAhead:
            return .bootstrap
        case .historyChanged:
            return .bootstrapAnyRevision
        case .sequenceGap(let expected, _):
            return .renumber(expected: expected)
        case .seqReused(let expected, let lowestTemporaryId, let firstReused, _):
            return .repairReusedSeqs(expected: expected, lowestTemporaryId: lowestTemporaryId, firstReused: firstReused)
        case .tooLarge:
            return changeSetCount > 1 ? .shrinkBatch : .fail
        case .unavailable(let retryAfter, _):
            return .retry(after: retryAfter)
        case .serverError, .connection, .invalidResponse:
            return .retry(after: nil)
        case .unauthorized, .unsupportedEncoding, .rejected:
            return .fail
        }
    }
}
