import RevsyncRules

/// Reads of stored records in one consistent snapshot, for corrective sets and rebuilt acknowledgements.
package protocol RecordReading {
    func mappings(_ ids: Set<Int64>, device: Device) async throws -> [Int64: TemporaryIdMapping]
    func records(_ entity: String, ids: [Int64]) async throws -> [StoredRecord]
    /// Records of `entity` whose `attribute` references one of `parents`, by id, at most `limit`.
    func records(_ entity: String, where attribute: String, in parents: [Int64], limit: Int) async throws -> [StoredRecord]
    /// What the temporary ids of the device's change set `seq` became, newest temporary id first.
    func createdIds(device: Device, seq: Int64) async throws -> [CreatedId]
}

/// Stored records, read in snapshots.
package protocol RecordStore: Sendable {
    func snapshot<T: Sendable>(_ body: @escaping @Sendable (any RecordReading) async throws -> T) async throws -> T
}
