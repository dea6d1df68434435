/// What the change sets of one batch have read and written so far, so that a later one is
/// applied in the same batch only when nothing it depends on is written by an earlier one.
///
/// A batch loads its facts (record versions, existing references, temporary ids, last seqs)
/// once, before any of its change sets is written. A change set whose facts an earlier change
/// set of the batch changes would be judged on stale facts, so it waits for the next batch,
/// which loads them anew. Reads may overlap: two change sets that both reference one parent
/// go together.
public struct BatchFootprint: Sendable {
    private var read: Set<RecordKey> = []
    private var written: Set<RecordKey> = []
    /// Temporary ids created in the batch, per device.
    private var created: [Int64: Set<Int64>] = [:]
    /// Seqs handled in the batch, per device.
    private var seqs: [Int64: Set<Int64>] = [:]

    public init() {}

    /// Whether a change set reading `reads` and writing `writes` must wait for the next batch.
    public func blocks(reads: some Collection<RecordKey>, writes: some Collection<RecordKey>) -> Bool {
        reads.contains(where: written.contains) || writes.contains { written.contains($0) || read.contains($0) }
    }

    /// Whether a change set of `device` uses a temporary id that an earlier one of the batch
    /// created: its mapping is not stored yet, so the set waits for the next batch.
    public func blocks(device: Int64, temporaryIds: Set<Int64>) -> Bool {
        guard let ids = created[device] else { return false }
        return !ids.isDisjoint(with: temporaryIds)
    }

    /// Whether `seq` of `device` was handled in this batch: its outcome is not stored yet.
    public func handled(device: Int64, seq: Int64) -> Bool {
        seqs[device]?.contains(seq) ?? false
    }

    /// Adds a change set that is applied or rejected in this batch.
    public mutating func add(device: Int64, seq: Int64?, created ids: some Sequence<Int64>, reads: some Sequence<RecordKey>, writes: some Sequence<RecordKey>) {
        read.formUnion(reads)
        written.formUnion(writes)
        created[device, default: []].formUnion(ids)
        if let seq { seqs[device, default: []].insert(seq) }
    }
}
