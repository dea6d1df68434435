import NIOCore
import RevsyncRules
import RevsyncServer
import RevsyncWire
import Synchronization

/// One transaction over a private copy of the state: reads see it, writes change it, and
/// `committed` is what replaces the dataset's state when the transaction succeeds.
final class InMemoryTransaction: ApplyTransaction, RecordReading, Sendable {
    private let working: Mutex<InMemoryState>
    /// Savepoints, innermost last.
    private let saved = Mutex<[InMemoryState]>([])
    private let schema: DatasetSchema

    init(state: InMemoryState, schema: DatasetSchema) {
        working = Mutex(state)
        self.schema = schema
    }

    var committed: InMemoryState { working.withLock { $0 } }

    private func read<T>(_ body: (InMemoryState) throws -> T) rethrows -> T { try working.withLock { try body($0) } }

    // MARK: LedgerReading

    func mappings(_ ids: Set<Int64>, device: Device) async throws -> [Int64: TemporaryIdMapping] {
        try await mappings([device.id: ids], allocating: [:]).known[device.id] ?? [:]
    }

    func lowestTemporaryId(_ device: Device) async throws -> Int64 {
        read { min(0, $0.temporaryIds[device.id]?.keys.min() ?? 0) }
    }

    // MARK: ApplyTransaction

    func lockDevices(_ ids: [Int64], mappings wanted: [Int64: Set<Int64>], allocating counts: [String: Int]) async throws -> LockedDevices {
        let locks = read { state in
            var locks: [Int64: DeviceLock] = [:]
            for id in ids {
                if let row = state.devices[id] { locks[id] = DeviceLock(lastSeq: row.lastSeq, revoked: row.revoked) }
            }
            return locks
        }
        let (known, new) = try await mappings(wanted, allocating: counts)
        return LockedDevices(locks: locks, known: known, ids: new)
    }

    func mappings(_ wanted: [Int64: Set<Int64>], allocating counts: [String: Int]) async throws -> (known: [Int64: [Int64: TemporaryIdMapping]], ids: [String: [Int64]]) {
        let known = read { state in
            var known: [Int64: [Int64: TemporaryIdMapping]] = [:]
            for (device, ids) in wanted {
                for id in ids {
                    if let mapping = state.temporaryIds[device]?[id] {
                        known[device, default: [:]][id] = TemporaryIdMapping(entity: mapping.entity, id: mapping.id)
                    }
                }
            }
            return known
        }
        // Like a sequence, ids once handed out are never handed out again, even after a rollback.
        let ids = working.withLock { state in
            var ids: [String: [Int64]] = [:]
            for (entity, count) in counts where count > 0 {
                let first = (state.lastId[entity] ?? 0) + 1
                state.lastId[entity] = first + Int64(count) - 1
                ids[entity] = Array(first..<(first + Int64(count)))
            }
            return ids
        }
        return (known, ids)
    }

    func storedOutcome(seq: Int64, device: Device) async throws -> StoredOutcome? {
        read { state in
            state.outcomes[device.id]?[seq].map { StoredOutcome(revision: $0.revision, reason: $0.reason, changeSet: nil, digest: $0.digest) }
        }
    }

    func lockVersions(_ keys: [RecordKey]) async throws -> [RecordKey: RecordVersion] {
        read { state in
            var versions: [RecordKey: RecordVersion] = [:]
            for key in keys {
                if let row = state.records[key.entity]?[key.id] {
                    versions[key] = RecordVersion(revision: row.revision, writer: row.writer, otherRevision: row.otherRevision)
                }
            }
            return versions
        }
    }

    func lockReferenced(_ keys: [RecordKey]) async throws -> Set<RecordKey> {
        read { state in Set(keys.filter { state.records[$0.entity]?[$0.id] != nil }) }
    }

    func lockChildren(_ relation: Relation, parents: [Int64]) async throws -> [ApplyPlanner.Child] {
        let parentSet = Set(parents)
        return read { state in
            (state.records[relation.child] ?? [:]).compactMap { id, row -> ApplyPlanner.Child? in
                guard case .integer(let parent)? = row.values[relation.attribute], parentSet.contains(parent) else { return nil }
                return ApplyPlanner.Child(id: id, parent: parent, version: RecordVersion(revision: row.revision, writer: row.writer, otherRevision: row.otherRevision))
            }.sorted { $0.id < $1.id }
        }
    }

    func writeRecords(_ writes: [PlannedWrite]) async throws {
        try working.withLock { state in
            var next = state
            for write in writes {
                let plan = write.plan
                for insert in plan.inserts {
                    for record in insert.records {
                        next.records[insert.entity, default: [:]][record.id] = .init(
                            revision: 0, writer: record.writer, otherRevision: record.otherRevision, values: record.values)
                    }
                }
                for update in plan.updates {
                    for record in update.records {
                        guard var row = next.records[update.entity]?[record.id] else { continue }
                        row.values.merge(record.values) { _, new in new }
                        row.writer = record.writer
                        row.otherRevision = record.otherRevision
                        next.records[update.entity]?[record.id] = row
                    }
                }
                for delete in plan.deletes {
                    for id in delete.ids { next.records[delete.entity]?[id] = nil }
                }
                for created in plan.createdIds {
                    next.temporaryIds[write.device.id, default: [:]][created.temporaryId] = .init(entity: created.entity, id: created.id, seq: plan.seq)
                }
            }
            try Self.checkReferences(next, schema: schema)
            state = next
        }
    }

    func stamp(_ writes: [PlannedWrite], rejections: [PlannedRejection], lastSeqs: [Int64: Int64]) async throws -> [CommittedEntry] {
        working.withLock { state in
            for rejection in rejections {
                state.outcomes[rejection.device.id, default: [:]][rejection.seq] = .init(
                    revision: nil, reason: rejection.reason, digest: rejection.digest, headAt: state.head)
            }
            for (device, seq) in lastSeqs { state.devices[device]?.lastSeq = seq }
            return writes.map { write in
                let plan = write.plan
                state.head += 1
                let revision = state.head
                for key in plan.applied.writtenKeys { state.records[key.entity]?[key.id]?.revision = revision }
                let body = LogEntryEncoder.substitute(plan.body, revision: revision)
                let authorBody = LogEntryEncoder.substitute(plan.authorBody, revision: revision)
                state.log[revision] = .init(deviceId: write.device.id, body: body, authorBody: authorBody)
                if let seq = plan.seq {
                    state.outcomes[write.device.id, default: [:]][seq] = .init(revision: revision, reason: nil, digest: write.digest, headAt: revision)
                }
                return CommittedEntry(revision: revision, deviceId: write.device.id, body: ByteBuffer(bytes: body), authorBody: ByteBuffer(bytes: authorBody))
            }
        }
    }

    /// `writeRecords` already checked every reference.
    func checkConstraints() async throws {}

    /// Transactions run one at a time (`InMemoryDataset`): nothing to lock.
    func lockRevisions() async throws {}

    func savepoint() async throws {
        let copy = working.withLock { $0 }
        saved.withLock { $0.append(copy) }
    }

    func rollbackToSavepoint() async throws {
        guard let copy = saved.withLock({ $0.last }) else { return }
        working.withLock { $0 = copy }
    }

    /// What PostgreSQL's foreign keys enforce: every reference names a record that exists.
    private static func checkReferences(_ state: InMemoryState, schema: DatasetSchema) throws(ConflictReason) {
        for entity in schema.entities {
            for attribute in entity.attributes {
                guard let target = attribute.references else { continue }
                for (id, row) in state.records[entity.name] ?? [:] {
                    guard case .integer(let parent)? = row.values[attribute.name], state.records[target]?[parent] == nil else { continue }
                    throw ConflictReason(code: .reference, entity: entity.name, id: id, message: "a referenced record does not exist: \(target) \(parent)")
                }
            }
        }
    }

    // MARK: RecordReading

    func records(_ entity: String, ids: [Int64]) async throws -> [StoredRecord] {
        read { state in
            Set(ids).sorted().compactMap { id in state.records[entity]?[id].map { StoredRecord(id: id, revision: $0.revision, values: $0.values) } }
        }
    }

    func records(_ entity: String, where attribute: String, in parents: [Int64], limit: Int) async throws -> [StoredRecord] {
        let parentSet = Set(parents)
        return read { state in
            let rows = (state.records[entity] ?? [:]).filter { _, row in
                if case .integer(let parent)? = row.values[attribute] { return parentSet.contains(parent) }
                return false
            }
            return rows.keys.sorted().prefix(max(0, limit)).compactMap { id in
                rows[id].map { StoredRecord(id: id, revision: $0.revision, values: $0.values) }
            }
        }
    }

    func createdIds(device: Device, seq: Int64) async throws -> [CreatedId] {
        read { state in
            (state.temporaryIds[device.id] ?? [:]).filter { $0.value.seq == seq }.sorted { $0.key > $1.key }.map {
                CreatedId(temporaryId: $0.key, entity: $0.value.entity, id: $0.value.id)
            }
        }
    }
}
