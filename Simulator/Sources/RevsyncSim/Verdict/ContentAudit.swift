import RevsyncRules
import RevsyncWire

/// An acknowledged change set whose log entry does not hold what the device sent.
public struct ContentMismatch: Sendable, Hashable, Codable, CustomStringConvertible {
    public var device: String
    public var seq: Int64
    public var revision: Int64
    /// What differs, e.g. `notes: created temporary ids -12 but the entry created -7, -8`.
    public var problem: String

    public init(device: String, seq: Int64, revision: Int64, problem: String) {
        self.device = device.lowercased()
        self.seq = seq
        self.revision = revision
        self.problem = problem
    }

    public var description: String { "device \(device) seq \(seq) at revision \(revision): \(problem)" }
}

/// Every acknowledged change set against the log entry at the revision its
/// acknowledgement named ("acknowledged content").
public struct ContentAudit: Sendable, Hashable {
    /// Acknowledgements compared (pruned ones included).
    public var acknowledged = 0
    /// At or below the horizon: the entry was pruned, so the content cannot be compared.
    public var pruned = 0
    public var mismatches: [ContentMismatch] = []
    /// Seqs a device took as acknowledged that no request of it carried to an answer
    /// acknowledging them: nothing says the server holds what the device made under
    /// them (a restored device's new edit taken for the lost copy's change set under its seq).
    public var unsent: [ChangeSetRef] = []
    /// Change sets a device got in the author's form (its `seq`, its temporary ids) that
    /// another device made.
    public var foreignAuthorForms: [ForeignAuthorForm] = []

    public init(
        acknowledged: Int = 0, pruned: Int = 0, mismatches: [ContentMismatch] = [], unsent: [ChangeSetRef] = [],
        foreignAuthorForms: [ForeignAuthorForm] = []
    ) {
        self.acknowledged = acknowledged
        self.pruned = pruned
        self.mismatches = mismatches
        self.unsent = unsent
        self.foreignAuthorForms = foreignAuthorForms
    }

    /// Notes every revision a device got in the author's form (`received`, by device) that
    /// the log says another device made (`authors`, by revision; pruned ones are not there).
    public mutating func checkAuthorForms(received: [String: [Int64]], authors: [Int64: String]) {
        foreignAuthorForms = received.flatMap { device, revisions in
            revisions.compactMap { revision -> ForeignAuthorForm? in
                guard let author = authors[revision], author.lowercased() != device.lowercased() else { return nil }
                return ForeignAuthorForm(device: device, revision: revision, author: author)
            }
        }.sorted()
    }

    /// Notes the seqs in `acknowledged` (what the devices took as acknowledged) that no
    /// entry of `sent` (what their requests carried and the answers acknowledged) covers.
    public mutating func checkSent(acknowledged: Set<ChangeSetRef>, sent: [AcknowledgedChangeSet]) {
        let carried = Set(sent.map { ChangeSetRef(device: $0.device, seq: $0.seq) })
        unsent = acknowledged.subtracting(carried).sorted()
    }

    /// Compares one acknowledgement with the entry read at its revision (nil: none there).
    /// - Parameter temporaryIds: the device's temporary ids mapped to permanent ones (`revsync_temp_ids`).
    public mutating func check(
        _ ack: AcknowledgedChangeSet, entry: LoggedChangeSet?, horizon: Int64, temporaryIds: [Int64: Int64], schema: DatasetSchema
    ) {
        acknowledged += 1
        if entry == nil, ack.revision <= horizon {
            pruned += 1
            return
        }
        if let problem = AcknowledgedContent.difference(ack, entry: entry, temporaryIds: temporaryIds, schema: schema) {
            mismatches.append(ContentMismatch(device: ack.device, seq: ack.seq, revision: ack.revision, problem: problem))
        }
    }
}

/// A change set a device got in the author's form that another device made.
public struct ForeignAuthorForm: Sendable, Hashable, Codable, Comparable, CustomStringConvertible {
    public var device: String
    public var revision: Int64
    /// The device the log says made it.
    public var author: String

    public init(device: String, revision: Int64, author: String) {
        self.device = device.lowercased()
        self.revision = revision
        self.author = author.lowercased()
    }

    public static func < (lhs: Self, rhs: Self) -> Bool { (lhs.device, lhs.revision) < (rhs.device, rhs.revision) }

    public var description: String { "device \(device) got revision \(revision), device \(author)'s" }
}
