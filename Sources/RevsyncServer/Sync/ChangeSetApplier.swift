import Crypto
import RevsyncRules
import RevsyncWire

/// Applies one change set in one transaction of a `ChangeSetStore`, or records why it was rejected.
///
/// Every decision is a rule of RevsyncRules taken on facts the store loaded under its
/// locks; this type only puts them in order. The store takes the revision last, so
/// concurrent change sets overlap in everything but the stamping of their revision.
struct ChangeSetApplier: Sendable {
    let store: any ChangeSetStore
    let schema: DatasetSchema
    let limits: ServerSettings.Limits

    func apply(_ changeSet: ChangeSet, device: Device) async throws -> ApplyOutcome {
        let validation = ChangeSetValidator(schema: schema, role: device.role, maxOperations: limits.maxOperationsPerChangeSet).validate(changeSet)
        let applier = self
        return try await store.transaction { transaction in
            try await applier.apply(changeSet, validation: validation, device: device, in: transaction)
        }
    }

    private func apply(
        _ changeSet: ChangeSet, validation: Result<NormalizedChangeSet, ConflictReason>, device: Device, in transaction: any ApplyTransaction
    ) async throws -> ApplyOutcome {
        guard let lock = try await transaction.lockDevice(device, forSeq: changeSet.seq != nil) else { throw SyncRefusal.deviceGone }
        if lock.revoked { throw SyncRefusal.deviceRevoked }
        // One look-up serves the digest, the resolver and the reuse check of created ids.
        var ids = ChangeSetCanonicalForm.temporaryIdsToResolve(changeSet, schema: schema)
        if case .success(let normalized) = validation {
            ids.formUnion(normalized.temporaryIdsToResolve.keys)
            ids.formUnion(normalized.creates.map(\.temporaryId))
        }
        let known = try await transaction.mappings(ids, device: device)
        let digest = SeqDigest.of(changeSet, known: known, schema: schema)
        if let seq = changeSet.seq, try SeqRules.admit(seq, last: lock.lastSeq) == .repeated {
            return try await storedOutcome(seq: seq, last: lock.lastSeq, digest: digest, sent: changeSet, device: device, in: transaction)
        }
        let planned: Result<WritePlan, ConflictReason>
        switch validation {
        case .failure(let reason): planned = .failure(reason)
        case .success(let normalized): planned = try await plan(normalized, known: known, device: device, in: transaction)
        }
        do {
            let plan = try planned.get()
            let entry = try await transaction.write(plan, digest: digest, device: device)
            return .applied(revision: entry.revision, seq: changeSet.seq, entry: entry)
        } catch let reason as ConflictReason {
            if let seq = changeSet.seq { try await transaction.recordRejection(reason, seq: seq, digest: digest, device: device) }
            return .rejected(reason, changeSet)
        }
    }

    /// Loads what the rules need, level by level, and lets them decide what the set writes.
    private func plan(
        _ normalized: NormalizedChangeSet, known: [Int64: TemporaryIdMapping], device: Device, in transaction: any ApplyTransaction
    ) async throws -> Result<WritePlan, ConflictReason> {
        var resolved: ResolvedChangeSet
        switch TemporaryIdResolver.resolve(normalized, schema: schema, known: known) {
        case .failure(let reason): return .failure(reason)
        case .success(let value): resolved = value
        }
        var versions = try await transaction.lockVersions(ApplyPlanner.lockTargets(resolved))
        if let reason = ApplyPlanner.conflict(resolved, versions: versions, device: device.id) { return .failure(reason) }
        let existing = try await transaction.lockReferenced(resolved.referencedRecords.sorted())
        if let reason = ApplyPlanner.missingReference(resolved, existing: existing) { return .failure(reason) }

        var permanentIds: [Int64: Int64] = [:]
        for (entity, group) in Dictionary(grouping: resolved.creates, by: \.entity).sorted(by: { $0.key < $1.key }) {
            let ids = try await transaction.allocateIds(entity, count: group.count)
            for (create, id) in zip(group, ids) { permanentIds[create.temporaryId] = id }
        }
        resolved.rewriteCreatedReferences(permanentIds, schema: schema)

        var deletes = DeletePlan(roots: resolved.deletes.map { RecordKey($0.entity, $0.id) })
        while true {
            let frontier = deletes.takeFrontier()
            if frontier.isEmpty { break }
            for (parent, ids) in frontier.sorted(by: { $0.key < $1.key }) {
                for relation in schema.references(to: parent) {
                    let stored = try await transaction.lockChildren(relation, parents: ids)
                    for child in stored { versions[RecordKey(relation.child, child.id)] = versions[RecordKey(relation.child, child.id)] ?? child.version }
                    let children = ApplyPlanner.dependents(relation, parents: ids, stored: stored, resolved: resolved, permanentIds: permanentIds)
                    let permissions = schema.entity(named: relation.child)?.permissions(for: device.role) ?? .none
                    do {
                        try deletes.addDependents(relation, parentEntity: parent, children: children, permissions: permissions)
                    } catch {
                        return .failure(error)
                    }
                }
            }
        }
        let clears: [(record: RecordKey, attributes: [String])]
        switch deletes.finish() {
        case .failure(let reason): return .failure(reason)
        case .success(let value): clears = value
        }
        return ApplyPlanner.plan(
            resolved, permanentIds: permanentIds, deletes: deletes, clears: clears, versions: versions, device: device.id,
            schema: schema, maxLogEntryBytes: limits.maxLogEntryBytes)
    }

    /// The outcome a repeated seq gets again, once its content is known to be the same change set.
    private func storedOutcome(
        seq: Int64, last: Int64, digest: [UInt8], sent: ChangeSet, device: Device, in transaction: any ApplyTransaction
    ) async throws -> ApplyOutcome {
        let stored = try await transaction.storedOutcome(seq: seq, device: device)
        if let problem = SeqRules.mismatch(stored: stored.map(\.digest), sent: digest) {
            throw SeqRules.reused(seq: seq, last: last, lowestTemporaryId: try await transaction.lowestTemporaryId(device), why: problem)
        }
        guard let stored else { throw StoreError.inconsistent("no stored outcome for seq \(seq) of device \(device.publicId)") }
        if let revision = stored.revision { return .repeated(revision: revision, seq: seq) }
        guard let reason = stored.reason else { throw StoreError.inconsistent("the stored outcome of seq \(seq) has neither a revision nor a reason") }
        // Outcomes from before digests kept the change set; newer ones are the same as the one sent.
        return .repeatedRejection(reason, stored.changeSet ?? sent)
    }
}

/// The content digest that makes a seq name one change set forever: SHA-256 of its canonical
/// form, with the device's mapped temporary ids resolved.
enum SeqDigest {
    static func of(_ changeSet: ChangeSet, known: [Int64: TemporaryIdMapping], schema: DatasetSchema) -> [UInt8] {
        Array(SHA256.hash(data: ChangeSetCanonicalForm.bytes(changeSet, schema: schema, permanentIds: known.mapValues(\.id))))
    }
}
