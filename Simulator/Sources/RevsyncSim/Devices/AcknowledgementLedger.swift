import RevsyncWire
import Synchronization

/// What one device had acknowledged, by content: for every acknowledgement in a
/// `/sync` answer whose request carried that `seq`, the change set the request
/// carried under it, the revision the acknowledgement named and the history id the
/// answer carried (a database restored from a backup numbers revisions again).
///
/// Acknowledgements for seqs the request did not carry (a restored device's own
/// older change sets, coming back in author form with the catch-up) are left out:
/// the device did not send them in that exchange, so nothing says what they should hold.
/// Kept across engines, so a restore does not forget what was acknowledged before it.
final class AcknowledgementLedger: Sendable {
    private struct Entry: Hashable {
        var seq: Int64
        var revision: Int64
        var history: String?
        var sent: ChangeSet
    }

    private struct AuthorForm: Hashable {
        var revision: Int64
        var history: String?
    }

    private let entries = Mutex<Set<Entry>>([])
    /// Every revision any answer brought in the author's form (with a `seq`): the server
    /// sends that form only to the device that made the change set.
    private let authorForms = Mutex<Set<AuthorForm>>([])

    /// Notes the acknowledgements of `response` that answer change sets of `request`, and
    /// the revisions it brought in the author's form.
    func record(_ request: SyncRequest, _ response: SyncResponse) {
        let authored = response.changeSets.compactMap { changeSet -> AuthorForm? in
            guard changeSet.conflict != true, changeSet.seq != nil, let revision = changeSet.revision else { return nil }
            return AuthorForm(revision: revision, history: response.history)
        }
        if !authored.isEmpty { authorForms.withLock { $0.formUnion(authored) } }
        let sent = Dictionary(request.changeSets.compactMap { set in set.seq.map { ($0, set) } }) { first, _ in first }
        guard !sent.isEmpty else { return }
        var found: [Entry] = []
        for changeSet in response.changeSets where changeSet.conflict != true {
            guard let seq = changeSet.seq, let revision = changeSet.revision, let content = sent[seq] else { continue }
            found.append(Entry(seq: seq, revision: revision, history: response.history, sent: content))
        }
        guard !found.isEmpty else { return }
        entries.withLock { $0.formUnion(found) }
    }

    /// The revisions answers brought in the author's form, in order, but those a database
    /// restore took away (`restore`).
    func authorFormRevisions(besides restore: RestorePoint? = nil) -> [Int64] {
        authorForms.withLock { $0 }
            .filter { restore?.tookAway(revision: $0.revision, history: $0.history) != true }
            .map(\.revision).sorted()
    }

    /// Everything recorded, as the device `deviceId`'s, in seq then revision order: `kept`,
    /// and `lost`, the acknowledgements of revisions a database restore took away.
    func acknowledged(by deviceId: String, besides restore: RestorePoint? = nil) -> (kept: [AcknowledgedChangeSet], lost: [AcknowledgedChangeSet]) {
        var kept: [AcknowledgedChangeSet] = [], lost: [AcknowledgedChangeSet] = []
        for entry in entries.withLock({ $0 }).sorted(by: { ($0.seq, $0.revision) < ($1.seq, $1.revision) }) {
            let ack = AcknowledgedChangeSet(device: deviceId, seq: entry.seq, revision: entry.revision, sent: entry.sent)
            if restore?.tookAway(revision: entry.revision, history: entry.history) == true { lost.append(ack) } else { kept.append(ack) }
        }
        return (kept, lost)
    }
}

/// Where a database restore took the log back to: revisions above `head` of the history ids
/// `histories` are not the database's any more. They are the backup's id (the one the database
/// had when the backup was taken, and kept until its instances renewed it), and, once the same
/// backup was put back again, the id the first restore was renewed to.
struct RestorePoint: Sendable, Hashable {
    var head: Int64
    /// The backup's id.
    var history: String
    var histories: Set<String>
    /// How many times the backup was put back.
    var restores = 1

    init(head: Int64, history: String) {
        self.head = head
        self.history = history
        self.histories = [history]
    }

    /// Whether an answer carrying `history` named a revision the restore took away. An answer
    /// between the restore and the renewal carries the old id for a revision of the new line;
    /// it is counted here too (and is in the log, so nothing is hidden but its check).
    func tookAway(revision: Int64, history answered: String?) -> Bool {
        guard let answered else { return false }
        return histories.contains(answered) && revision > head
    }
}
