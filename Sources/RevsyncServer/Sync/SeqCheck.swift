import RevsyncRules
import RevsyncWire

/// Checks a request's seqs before anything of it applies: they increase, the first new one
/// is the next expected (`sequence_gap`), and every repeated one carries the change set it
/// named before (`seq_reused`). Each change set's transaction checks its own seq again under
/// the device's lock, with the same rules, since another request may have moved it meanwhile.
struct SeqCheck: Sendable {
    let store: any ChangeSetStore
    let schema: DatasetSchema

    func check(_ changeSets: [ChangeSet], device: Device) async throws {
        let seqs = changeSets.compactMap(\.seq)
        guard !seqs.isEmpty else { return }
        try SeqRules.checkOrder(seqs)
        let schema = self.schema
        try await store.read { ledger in
            let last = try await ledger.lastSeq(device)
            _ = try SeqRules.admit(seqs, last: last)
            let repeated = changeSets.filter { ($0.seq ?? .max) <= last }
            guard !repeated.isEmpty else { return }
            let ids = repeated.reduce(into: Set<Int64>()) { $0.formUnion(ChangeSetCanonicalForm.temporaryIdsToResolve($1, schema: schema)) }
            let known = try await ledger.mappings(ids, device: device)
            let stored = try await ledger.digests(repeated.compactMap(\.seq), device: device)
            for changeSet in repeated {
                guard let seq = changeSet.seq else { continue }
                if let problem = SeqRules.mismatch(stored: stored[seq], sent: SeqDigest.of(changeSet, known: known, schema: schema)) {
                    throw SeqRules.reused(seq: seq, last: last, lowestTemporaryId: try await ledger.lowestTemporaryId(device), why: problem)
                }
            }
        }
    }
}
