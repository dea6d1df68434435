import RevsyncWire

/// The contract's rules for a device's seqs: they count up from 1 without gaps, and a
/// seq names one change set forever (a repeat with the same content is a retry).
public enum SeqRules {
    /// What a change set's seq is, against the last seq the server handled for its device.
    public enum Admission: Sendable, Equatable {
        /// The next seq: apply it.
        case next
        /// Handled before: answer with its stored outcome, if the content is the same.
        case repeated
    }

    /// A request's seqs increase and start at 1.
    public static func checkOrder(_ seqs: [Int64]) throws(SyncRefusal) {
        for (previous, next) in zip(seqs, seqs.dropFirst()) where next <= previous {
            throw SyncRefusal(.invalidRequest, "change set seqs must increase within a request: \(next) follows \(previous)")
        }
        if let first = seqs.first, first < 1 {
            throw SyncRefusal(.invalidRequest, "seq starts at 1")
        }
    }

    /// Admits a request's increasing seqs in order: each is a repeat or the next one.
    /// - Returns: the admission of each seq.
    public static func admit(_ seqs: [Int64], last: Int64) throws(SyncRefusal) -> [Admission] {
        var expected = last + 1
        var admissions: [Admission] = []
        for seq in seqs {
            if seq <= last {
                admissions.append(.repeated)
                continue
            }
            guard seq == expected else { throw gap(seq, expected: expected) }
            admissions.append(.next)
            expected += 1
        }
        return admissions
    }

    /// Admits one change set's seq inside its transaction, with the device's row locked.
    public static func admit(_ seq: Int64, last: Int64) throws(SyncRefusal) -> Admission {
        try admit([seq], last: last)[0]
    }

    /// Why a repeated seq is not a retry of the change set it named, or nil when it is.
    /// - Parameter stored: nil when no outcome is kept (pruned); `.some(nil)` for an outcome from before digests.
    public static func mismatch(stored: [UInt8]??, sent: [UInt8]) -> String? {
        switch stored {
        case .none: "was handled long ago and its outcome is no longer kept"
        case .some(.none): nil
        case .some(.some(let digest)): digest == sent ? nil : "already named a different change set"
        }
    }

    /// The refusal of a change set sent under a seq that named another one.
    public static func reused(seq: Int64, last: Int64, lowestTemporaryId: Int64, why: String) -> SyncRefusal {
        var refusal = SyncRefusal(
            .seqReused,
            "seq \(seq) \(why): renumber the pending change sets from seq \(seq) on to \(last + 1), \(last + 2), …, "
                + "and the temporary ids they create below \(lowestTemporaryId)",
            expected: last + 1)
        refusal.lowestTemporaryId = lowestTemporaryId
        refusal.seq = seq
        return refusal
    }

    static func gap(_ seq: Int64, expected: Int64) -> SyncRefusal {
        SyncRefusal(.sequenceGap, "change set seq \(seq) skips ahead: the next expected seq is \(expected)", expected: expected)
    }
}
