/// Finds the first pending change set that the server refuses as `seq_reused`,
/// among the pending ones whose `seq` it has already handled ("suspects").
///
/// The server refuses a request whole when any of its change sets reuses a seq
/// for other content. It names the first such seq of the request, which ends the
/// search at once; for a server that does not say, the engine probes: it sends runs of suspects and throws the answers away (the server
/// applies nothing for a seq it has handled; it only repeats the old outcome).
/// A run that is accepted proves each of its change sets is a true retry; a run
/// that is refused holds at least one impostor. Bisecting the first refused run
/// finds the first impostor in a few requests: every suspect before it is
/// proven a retry, and it and everything after it are renumbered
/// (`ReusedSeqRepair`).
///
/// The answers must be thrown away, not applied: until the impostors are
/// renumbered, the server's catch-up carries its own change sets under the
/// impostors' seqs and temporary ids, and applying them would take the
/// impostors for acknowledged and drop them.
///
/// On a restored device the change sets it had before the backup come first and
/// are retries; those it made afterwards follow and reuse seqs: the first
/// refused one is where the new ones start.
public struct ReusedSeqSearch: Sendable, Hashable {
    /// What to do next.
    public enum Step: Sendable, Hashable {
        /// Send the pending change sets with these seqs and discard the answer;
        /// then `record(refused:)`.
        case probe(ClosedRange<Int64>)
        /// Every suspect before this one is a retry: renumber from this one on.
        case firstReused(Int64)
        /// Every suspect is a retry of what the server handled under its seq.
        case noneReused
    }

    /// Pending seqs the server has handled and that are not proven retries yet, ascending.
    public let suspects: [Int64]
    /// `suspects[..<low]` are proven retries.
    private var low = 0
    /// When set, `suspects[low...refusedThrough]` holds an impostor.
    private var refusedThrough: Int?
    /// The last index of the probe in flight.
    private var probing: Int?

    /// - Parameters:
    ///   - refusedThrough: the last suspect of a request the server refused,
    ///     when the search starts from such a refusal (the impostor is at or before it).
    ///   - firstReused: the seq the server named as the first impostor of that request.
    public init(suspects: [Int64], refusedThrough: Int64? = nil, firstReused: Int64? = nil) {
        self.suspects = suspects
        if let refusedThrough, let index = suspects.lastIndex(where: { $0 <= refusedThrough }) {
            self.refusedThrough = index
        }
        if let firstReused { name(firstReused) }
    }

    /// Every suspect before `seq` was in the refused request ahead of it, so it is a
    /// retry, and `seq` is the first impostor.
    private mutating func name(_ seq: Int64) {
        guard let index = suspects.firstIndex(of: seq), index >= low else { return }
        low = index
        refusedThrough = index
    }

    /// The seqs proven to be retries so far.
    public var provenRetries: ArraySlice<Int64> { suspects[..<low] }

    /// The next step, sending at most `window` change sets at once.
    public mutating func next(window: Int) -> Step {
        let window = max(1, window)
        if let high = refusedThrough {
            if low >= high { return .firstReused(suspects[high]) }
            // Both halves are non-empty: each probe narrows the range.
            let end = min((low + high) / 2, low + window - 1)
            probing = end
            return .probe(suspects[low]...suspects[end])
        }
        guard low < suspects.count else { return .noneReused }
        let end = min(suspects.count, low + window) - 1
        probing = end
        return .probe(suspects[low]...suspects[end])
    }

    /// The server's verdict on the last probe, with the impostor it named, if any.
    public mutating func record(refused: Bool, firstReused: Int64? = nil) {
        guard let end = probing else { return }
        probing = nil
        if refused {
            refusedThrough = end
            if let firstReused { name(firstReused) }
        } else {
            low = end + 1
        }
    }
}
