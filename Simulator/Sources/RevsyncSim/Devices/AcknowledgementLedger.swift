import RevsyncWire
import Synchronization

/// What one device had acknowledged, by content: for every acknowledgement in a
/// `/sync` answer whose request carried that `seq`, the change set the request
/// carried under it and the revision the acknowledgement named.
///
/// Acknowledgements for seqs the request did not carry (a restored device's own
/// older change sets, coming back in author form with the catch-up) are left out:
/// the device did not send them in that exchange, so nothing says what they should hold.
/// Kept across engines, so a restore does not forget what was acknowledged before it.
final class AcknowledgementLedger: Sendable {
    private struct Entry: Hashable {
        var seq: Int64
        var revision: Int64
        var sent: ChangeSet
    }

    private let entries = Mutex<Set<Entry>>([])
    /// Every revision any answer brought in the author's form (with a `seq`): the server
    /// sends that form only to the device that made the change set.
    private let authorForms = Mutex<Set<Int64>>([])

    /// Notes the acknowledgements of `response` that answer change sets of `request`, and
    /// the revisions it brought in the author's form.
    func record(_ request: SyncRequest, _ response: SyncResponse) {
        let authored = response.changeSets.compactMap { changeSet -> Int64? in
            guard changeSet.conflict != true, changeSet.seq != nil else { return nil }
            return changeSet.revision
        }
        if !authored.isEmpty { authorForms.withLock { $0.formUnion(authored) } }
        let sent = Dictionary(request.changeSets.compactMap { set in set.seq.map { ($0, set) } }) { first, _ in first }
        guard !sent.isEmpty else { return }
        var found: [Entry] = []
        for changeSet in response.changeSets where changeSet.conflict != true {
            guard let seq = changeSet.seq, let revision = changeSet.revision, let content = sent[seq] else { continue }
            found.append(Entry(seq: seq, revision: revision, sent: content))
        }
        guard !found.isEmpty else { return }
        entries.withLock { $0.formUnion(found) }
    }

    /// The revisions answers brought in the author's form, in order.
    var authorFormRevisions: [Int64] { authorForms.withLock { $0 }.sorted() }

    /// Everything recorded, as the device `deviceId`'s, in seq then revision order.
    func acknowledged(by deviceId: String) -> [AcknowledgedChangeSet] {
        entries.withLock { $0 }
            .sorted { ($0.seq, $0.revision) < ($1.seq, $1.revision) }
            .map { AcknowledgedChangeSet(device: deviceId, seq: $0.seq, revision: $0.revision, sent: $0.sent) }
    }
}
