import Crypto
import RevsyncRules
import RevsyncWire

/// One change set of a batch, with what is known of it before the transaction.
struct BatchItem: Sendable {
    let changeSet: ChangeSet
    let device: Device
    let validation: Result<NormalizedChangeSet, ConflictReason>
    /// Every temporary id the set uses or creates: one look-up serves the digest, the
    /// resolver and the reuse check of created ids.
    let temporaryIds: Set<Int64>
    /// The seq digest, when it needs none of the device's mappings: made by the request's own
    /// task, before the batch, instead of by the leader while it holds the batch's locks.
    var digest: [UInt8]? = nil
    /// Which request it belongs to, within the batch.
    var job = 0
}

/// What became of one change set of a batch.
enum BatchResult: Sendable {
    case done(ApplyOutcome)
    /// It depends on what an earlier change set of the batch writes: it goes in the next batch.
    case deferred
    /// A refusal under the device's lock (revoked, gone, a seq rule): its request stops here.
    case failed(any Error)
}

/// Applies a batch of change sets in one transaction of a `ChangeSetStore`: the facts of
/// all of them are loaded in a few set-based statements under their locks, the rules decide
/// each in queue order, and the winners are written together and take consecutive
/// revisions with one stamp.
///
/// Every decision is a rule of RevsyncRules; this type only puts them in order. A change
/// set that depends on what an earlier one of the batch writes (`BatchFootprint`) is
/// deferred to the next batch, so that every rule sees the facts it would see alone. When
/// PostgreSQL refuses the batch's writes (a constraint the rules do not check), the batch is
/// run again with a savepoint per winner, so the one at fault is rejected alone.
struct ChangeSetApplier: Sendable {
    let store: any ChangeSetStore
    let schema: DatasetSchema
    let limits: ServerSettings.Limits

    /// Most change sets in one batch: in the isolated run each winner takes a savepoint, and
    /// past 64 subtransactions PostgreSQL's per-backend cache overflows and every backend slows down.
    static let maxBatch = 64

    /// A request that names entities or attributes this instance's schema lacks and a newer
    /// schema the database was migrated to has (a rolling upgrade: another instance runs it):
    /// `503`, so that the device sends it again, to an upgraded instance, instead of having its
    /// change set rejected `invalid` and undone. A name no schema has is rejected as before. Only
    /// requests with a change set the validator refused are looked at (an unknown name always is
    /// refused), so the requests that pass cost nothing more; one query for those that name
    /// something this instance does not know.
    func refuseIfUpgradeUnderWay(_ items: [BatchItem]) async throws {
        guard items.contains(where: { if case .failure = $0.validation { true } else { false } }) else { return }
        let changeSets = items.map(\.changeSet)
        guard let unknown = schema.firstUnknownName(in: changeSets) else { return }
        guard let newest = try await store.newestDatasetSchema(), newest.version > schema.version,
            newest.firstUnknownName(in: changeSets) == nil
        else { return }
        throw StoreError.unavailable(
            "this instance runs dataset schema version \(schema.version) and the database has version \(newest.version), which names "
                + "\"\(unknown)\": an upgrade is under way; send it again (an upgraded instance will take it)")
    }

    func item(_ changeSet: ChangeSet, device: Device) -> BatchItem {
        let validation = ChangeSetValidator(schema: schema, role: device.role, maxOperations: limits.maxOperationsPerChangeSet).validate(changeSet)
        var ids = ChangeSetCanonicalForm.temporaryIdsToResolve(changeSet, schema: schema)
        if case .success(let normalized) = validation {
            ids.formUnion(normalized.temporaryIdsToResolve.keys)
            ids.formUnion(normalized.creates.map(\.temporaryId))
        }
        var item = BatchItem(changeSet: changeSet, device: device, validation: validation, temporaryIds: ids)
        if changeSet.seq != nil { item.digest = SeqDigest.withoutMappings(changeSet, schema: schema) }
        return item
    }

    /// Applies `items` (in queue order) in one transaction; one result per item.
    func apply(_ items: [BatchItem]) async throws -> [BatchResult] {
        let applier = self
        do {
            return try await store.transaction { try await applier.run(items, isolated: false, in: $0) }
        } catch is ConflictReason {
            // PostgreSQL refused the batch's writes as a whole (the rules decide rejections as
            // values, so only the database throws one): run it again, each winner at its own savepoint.
            return try await store.transaction { try await applier.run(items, isolated: true, in: $0) }
        }
    }

    /// What the first pass learned of an item, before its records are locked.
    private enum Stage {
        case result(BatchResult)
        case repeated(seq: Int64, last: Int64, digest: [UInt8])
        case rejected(ConflictReason, digest: [UInt8])
        case resolved(ResolvedChangeSet, digest: [UInt8])
    }

    private func run(_ items: [BatchItem], isolated: Bool, in transaction: any ApplyTransaction) async throws -> [BatchResult] {
        let (devices, wanted, creates) = Self.devices(of: items)
        let locked = try await transaction.lockDevices(devices, mappings: wanted, allocating: creates)
        let locks = locked.locks, known = locked.known
        var ids = locked.ids

        // First pass, on the devices' rows and mappings: seqs, digests, temporary ids.
        let stages = firstPass(items, locks: locks, known: known)

        // The records of all of them, locked in a few statements.
        let (lockTargets, referenced) = Self.records(of: stages)
        let versions = try await transaction.lockVersions(lockTargets)
        let existing = try await transaction.lockReferenced(referenced)

        // Second pass, in queue order: the rules on those facts.
        var footprint = BatchFootprint()
        var results: [BatchResult] = []
        var stopped: Set<Int64> = []
        var stoppedJobs: Set<Int> = []
        var winners: [(index: Int, write: PlannedWrite)] = []
        var rejections: [(index: Int, rejection: PlannedRejection)] = []
        for (index, (item, stage)) in zip(items, stages).enumerated() {
            let device = item.device.id
            // Behind a deferred change set of its device, or a failed one of its request, nothing goes.
            if stopped.contains(device) || stoppedJobs.contains(item.job) {
                results.append(.deferred)
                stopped.insert(device)
                continue
            }
            var result: BatchResult
            var won = false
            // A rejection is handled: its seq keeps the outcome, and no later change set depends on it.
            func reject(_ reason: ConflictReason, digest: [UInt8]) -> BatchResult {
                if let seq = item.changeSet.seq {
                    rejections.append((index, PlannedRejection(reason: reason, seq: seq, digest: digest, device: item.device)))
                }
                footprint.add(device: device, seq: item.changeSet.seq, created: [], reads: [], writes: [])
                return .done(.rejected(reason, item.changeSet))
            }
            switch stage {
            case .result(let decided):
                result = decided
            case .repeated(let seq, let last, let digest):
                result = try await repeatedOutcome(seq: seq, last: last, digest: digest, sent: item.changeSet, device: item.device, in: transaction)
            case .rejected(let reason, let digest):
                result = reject(reason, digest: digest)
            case .resolved(let resolved, let digest):
                let planned = try await plan(resolved, item: item, versions: versions, existing: existing, ids: &ids, footprint: footprint, in: transaction)
                switch planned {
                case .deferred:
                    result = .deferred
                case .rejected(let reason):
                    result = reject(reason, digest: digest)
                case .accepted(let plan, let reads, let writes):
                    winners.append((index, PlannedWrite(plan: plan, digest: digest, device: item.device)))
                    result = .deferred  // until it is stamped below
                    won = true
                    footprint.add(device: device, seq: item.changeSet.seq, created: plan.createdIds.map(\.temporaryId), reads: reads, writes: writes)
                }
            }
            switch result {
            case .deferred where !won: stopped.insert(device)
            case .failed: stoppedJobs.insert(item.job)
            default: break
            }
            results.append(result)
        }

        // The winners' records: each at its own savepoint once PostgreSQL refused them together;
        // otherwise together, with the stamp below.
        if isolated {
            winners = try await writeIsolated(winners, items: items, results: &results, rejections: &rejections, in: transaction)
        }

        let stamping = Self.stamping(winners, rejections)
        // Together, the winners' records are written with the stamp: a refusal there, or at
        // COMMIT, escapes as `ConflictReason` and the batch runs again isolated.
        let entries = isolated
            ? try await transaction.stamp(stamping.writes, rejections: stamping.rejections, lastSeqs: stamping.lastSeqs)
            : try await transaction.writeAndStamp(stamping.writes, rejections: stamping.rejections, lastSeqs: stamping.lastSeqs)
        for (winner, entry) in zip(winners, entries) {
            results[winner.index] = .done(.applied(revision: entry.revision, seq: items[winner.index].changeSet.seq, entry: entry))
        }
        return results
    }

    /// The winners' records, each at its own savepoint, once PostgreSQL refused them together:
    /// those refused alone become rejections. Returns the winners kept.
    private func writeIsolated(
        _ winners: [(index: Int, write: PlannedWrite)], items: [BatchItem], results: inout [BatchResult],
        rejections: inout [(index: Int, rejection: PlannedRejection)], in transaction: any ApplyTransaction
    ) async throws -> [(index: Int, write: PlannedWrite)] {
        // Its writes come before its stamp: the revision lock first, so that no value it
        // writes is held while it waits for the lock (`lockRevisions`).
        if !winners.isEmpty { try await transaction.lockRevisions() }
        var kept: [(index: Int, write: PlannedWrite)] = []
        for winner in winners {
            try await transaction.savepoint()
            do {
                try await transaction.writeRecords([winner.write])
                try await transaction.checkConstraints()
                kept.append(winner)
            } catch let reason as ConflictReason {
                try await transaction.rollbackToSavepoint()
                let item = items[winner.index]
                results[winner.index] = .done(.rejected(reason, item.changeSet))
                if let seq = item.changeSet.seq {
                    rejections.append((winner.index, PlannedRejection(reason: reason, seq: seq, digest: winner.write.digest, device: item.device)))
                }
            }
        }
        return kept
    }

    /// What the stamp writes: the winners, the rejections in queue order, and each device's
    /// last seq moved to the highest it had handled here.
    @inline(never)
    private static func stamping(
        _ winners: [(index: Int, write: PlannedWrite)], _ rejections: [(index: Int, rejection: PlannedRejection)]
    ) -> (writes: [PlannedWrite], rejections: [PlannedRejection], lastSeqs: [Int64: Int64]) {
        var handled: [Int64: Int64] = [:]
        let seqs = winners.compactMap { winner in winner.write.plan.seq.map { (winner.write.device.id, $0) } }
            + rejections.map { ($0.rejection.device.id, $0.rejection.seq) }
        for (device, seq) in seqs { handled[device] = max(handled[device] ?? 0, seq) }
        return (winners.map(\.write), rejections.sorted { $0.index < $1.index }.map(\.rejection), handled)
    }

    /// The batch's devices, sorted, the temporary ids each maps, and how many ids each entity's creates need.
    @inline(never)
    private static func devices(of items: [BatchItem]) -> (devices: [Int64], wanted: [Int64: Set<Int64>], creates: [String: Int]) {
        var wanted: [Int64: Set<Int64>] = [:], creates: [String: Int] = [:]
        for item in items {
            wanted[item.device.id, default: []].formUnion(item.temporaryIds)
            // Ids for every valid create; those of sets rejected later are never used, as after a rollback.
            if case .success(let normalized) = item.validation {
                for create in normalized.creates { creates[create.entity, default: 0] += 1 }
            }
        }
        return (Set(items.map(\.device.id)).sorted(), wanted, creates)
    }

    /// The first pass of `run`, on the devices' rows and mappings: seqs, digests, temporary
    /// ids. Synchronous and apart, like `records(of:)`, so that its locals are not in
    /// `run`'s frame: the leader's task keeps that frame's high-water mark for as long as its
    /// connection lives.
    @inline(never)
    private func firstPass(_ items: [BatchItem], locks: [Int64: DeviceLock], known: [Int64: [Int64: TemporaryIdMapping]]) -> [Stage] {
            var footprint = BatchFootprint()
            var lastSeq = locks.mapValues(\.lastSeq)
            var stages: [Stage] = []
            // A request's seqs are admitted together, before any of them applies: a gap refuses it whole.
            var admitted: [Int: SyncRefusal?] = [:]
            // Behind a deferred change set of a device, its later ones wait too.
            var waiting: Set<Int64> = []
            for item in items {
                let device = item.device.id
                guard let lock = locks[device] else { stages.append(.result(.failed(SyncRefusal.deviceGone))); continue }
                if lock.revoked { stages.append(.result(.failed(SyncRefusal.deviceRevoked))); continue }
                if waiting.contains(device) || footprint.blocks(device: device, temporaryIds: item.temporaryIds) {
                    waiting.insert(device)
                    stages.append(.result(.deferred))
                    continue
                }
                if admitted[item.job] == nil {
                    let seqs = items.filter { $0.job == item.job }.compactMap(\.changeSet.seq)
                    do {
                        _ = try SeqRules.admit(seqs, last: lastSeq[device] ?? 0)
                        admitted[item.job] = .some(nil)
                    } catch {
                        admitted[item.job] = error
                    }
                }
                if case .some(.some(let refusal)) = admitted[item.job] { stages.append(.result(.failed(refusal))); continue }
                let mapped = known[device] ?? [:]
                let digest = item.digest ?? SeqDigest.of(item.changeSet, known: mapped, schema: schema)
                if let seq = item.changeSet.seq {
                    let admission: SeqRules.Admission
                    do {
                        admission = try SeqRules.admit(seq, last: lastSeq[device] ?? 0)
                    } catch {
                        stages.append(.result(.failed(error)))
                        continue
                    }
                    if admission == .repeated {
                        // Handled earlier in this batch: its outcome is stored once the batch commits.
                        if footprint.handled(device: device, seq: seq) {
                            waiting.insert(device)
                            stages.append(.result(.deferred))
                        } else {
                            stages.append(.repeated(seq: seq, last: lock.lastSeq, digest: digest))
                        }
                        continue
                    }
                    lastSeq[device] = seq
                }
                switch item.validation.flatMap({ TemporaryIdResolver.resolve($0, schema: schema, known: mapped) }) {
                case .failure(let reason): stages.append(.rejected(reason, digest: digest))
                case .success(let resolved): stages.append(.resolved(resolved, digest: digest))
                }
                // Only the ids it creates: those it merely uses are mapped already, and others may use them too.
                let creating = (try? item.validation.get())?.creates.map(\.temporaryId) ?? []
                footprint.add(device: device, seq: item.changeSet.seq, created: creating, reads: [], writes: [])
            }
        return stages
    }

    /// The records the resolved change sets write (to lock with their versions) and refer to, sorted.
    @inline(never)
    private static func records(of stages: [Stage]) -> (lockTargets: [RecordKey], referenced: [RecordKey]) {
        var lockTargets: Set<RecordKey> = [], referenced: Set<RecordKey> = []
        for case .resolved(let resolved, _) in stages {
            lockTargets.formUnion(ApplyPlanner.lockTargets(resolved))
            referenced.formUnion(resolved.referencedRecords)
        }
        return (lockTargets.sorted(), referenced.sorted())
    }

    private enum Planned {
        case deferred
        case rejected(ConflictReason)
        case accepted(WritePlan, reads: Set<RecordKey>, writes: Set<RecordKey>)
    }

    /// The rules for one resolved change set, on the batch's facts; the delete walk loads its own.
    private func plan(
        _ resolved: ResolvedChangeSet, item: BatchItem, versions batchVersions: [RecordKey: RecordVersion], existing: Set<RecordKey>,
        ids: inout [String: [Int64]], footprint: BatchFootprint, in transaction: any ApplyTransaction
    ) async throws -> Planned {
        let device = item.device
        let targets = ApplyPlanner.lockTargets(resolved)
        if footprint.blocks(reads: resolved.referencedRecords, writes: targets) { return .deferred }
        var versions = batchVersions
        if let reason = ApplyPlanner.conflict(resolved, versions: versions, device: device.id) { return .rejected(reason) }
        if let reason = ApplyPlanner.missingReference(resolved, existing: existing) { return .rejected(reason) }

        var resolved = resolved
        var permanentIds: [Int64: Int64] = [:]
        for create in resolved.creates {
            guard let id = ids[create.entity]?.first else { throw StoreError.inconsistent("no permanent id was allocated for a \(create.entity) record") }
            ids[create.entity]?.removeFirst()
            permanentIds[create.temporaryId] = id
        }
        resolved.rewriteCreatedReferences(permanentIds, schema: schema)

        var deletes = DeletePlan(roots: resolved.deletes.map { RecordKey($0.entity, $0.id) })
        while true {
            let frontier = deletes.takeFrontier()
            if frontier.isEmpty { break }
            for (parent, parents) in frontier.sorted(by: { $0.key < $1.key }) {
                for relation in schema.references(to: parent) {
                    let stored = try await transaction.lockChildren(relation, parents: parents)
                    for child in stored { versions[RecordKey(relation.child, child.id)] = versions[RecordKey(relation.child, child.id)] ?? child.version }
                    let children = ApplyPlanner.dependents(relation, parents: parents, stored: stored, resolved: resolved, permanentIds: permanentIds)
                    let permissions = schema.entity(named: relation.child)?.permissions(for: device.role) ?? .none
                    do {
                        try deletes.addDependents(relation, parentEntity: parent, children: children, permissions: permissions)
                    } catch {
                        return .rejected(error)
                    }
                }
            }
        }
        let clears: [(record: RecordKey, attributes: [String])]
        switch deletes.finish() {
        case .failure(let reason): return .rejected(reason)
        case .success(let value): clears = value
        }
        let cascaded = Set(deletes.deleted).union(clears.map(\.record))
        // What the walk found may be what an earlier change set of the batch writes or reads.
        if footprint.blocks(reads: [], writes: cascaded) { return .deferred }
        switch ApplyPlanner.plan(
            resolved, permanentIds: permanentIds, deletes: deletes, clears: clears, versions: versions, device: device.id,
            schema: schema, maxLogEntryBytes: limits.maxLogEntryBytes)
        {
        case .failure(let reason): return .rejected(reason)
        case .success(let plan):
            return .accepted(plan, reads: resolved.referencedRecords, writes: cascaded.union(targets).union(plan.applied.writtenKeys))
        }
    }

    /// The outcome a repeated seq gets again, once its content is known to be the same change set.
    @inline(never)
    private func repeatedOutcome(
        seq: Int64, last: Int64, digest: [UInt8], sent: ChangeSet, device: Device, in transaction: any ApplyTransaction
    ) async throws -> BatchResult {
        let stored = try await transaction.storedOutcome(seq: seq, device: device)
        if let problem = SeqRules.mismatch(stored: stored.map(\.digest), sent: digest) {
            return .failed(SeqRules.reused(seq: seq, last: last, lowestTemporaryId: try await transaction.lowestTemporaryId(device), why: problem))
        }
        guard let stored else { throw StoreError.inconsistent("no stored outcome for seq \(seq) of device \(device.publicId)") }
        if let revision = stored.revision { return .done(.repeated(revision: revision, seq: seq)) }
        guard let reason = stored.reason else { throw StoreError.inconsistent("the stored outcome of seq \(seq) has neither a revision nor a reason") }
        // Outcomes from before digests kept the change set; newer ones are the same as the one sent.
        return .done(.repeatedRejection(reason, stored.changeSet ?? sent))
    }
}

/// The content digest that makes a seq name one change set forever: SHA-256 of its canonical
/// form, with the device's mapped temporary ids resolved.
enum SeqDigest {
    static func of(_ changeSet: ChangeSet, known: [Int64: TemporaryIdMapping], schema: DatasetSchema) -> [UInt8] {
        Array(SHA256.hash(data: ChangeSetCanonicalForm.bytes(changeSet, schema: schema, permanentIds: known.mapValues(\.id))))
    }

    /// The same digest, when no mapping could change it (`ChangeSetCanonicalForm.bytesWithoutMappings`).
    static func withoutMappings(_ changeSet: ChangeSet, schema: DatasetSchema) -> [UInt8]? {
        ChangeSetCanonicalForm.bytesWithoutMappings(changeSet, schema: schema).map { Array(SHA256.hash(data: $0)) }
    }
}
