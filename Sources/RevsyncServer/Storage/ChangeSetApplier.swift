import Foundation
import Logging
import PostgresNIO
import RevsyncRules
import RevsyncWire

/// Applies one change set in one PostgreSQL transaction, or records why it was rejected.
///
/// The sync rules are the pure types of RevsyncRules; this type only loads what
/// they need and writes what they decide. The revision row lock is taken in the
/// last statement before COMMIT, so concurrent change sets overlap in everything
/// but the stamping of their revision.
struct ChangeSetApplier: Sendable {
    let database: Database
    let schema: DatasetSchema
    let limits: ServerSettings.Limits
    var delayBeforeRevision: ApplyDelay? = nil

    /// SQLSTATEs that mean "run the whole transaction again".
    private static let retryableStates: Set<String> = ["40001", "40P01"]

    func apply(_ changeSet: ChangeSet, device: Device) async throws -> ApplyOutcome {
        let validation = ChangeSetValidator(schema: schema, role: device.role, maxOperations: limits.maxOperationsPerChangeSet).validate(changeSet)
        var attempt = 0
        while true {
            attempt += 1
            do {
                return try await applyOnce(changeSet, validation: validation, device: device)
            } catch let error where attempt < 5 && error.sqlState.map(Self.retryableStates.contains) == true {
                database.logger.debug("retrying change set after a deadlock", metadata: ["attempt": "\(attempt)"])
            }
        }
    }

    private func applyOnce(
        _ changeSet: ChangeSet, validation: Result<NormalizedChangeSet, ConflictReason>, device: Device
    ) async throws -> ApplyOutcome {
        let logger = database.logger
        let writer = ChangeSetWriter(
            schema: schema, device: device, logger: logger, maxLogEntryBytes: limits.maxLogEntryBytes, delayBeforeRevision: delayBeforeRevision)
        let ledger = SeqLedger(database: database, schema: schema)
        return try await database.transaction { connection in
            let last = try await Self.lockDevice(device, forSeq: changeSet.seq != nil, on: connection, logger: logger)
            // One look-up serves the digest, the resolver and the reuse check of created ids.
            var ids = ChangeSetCanonicalForm.temporaryIdsToResolve(changeSet, schema: schema)
            if case .success(let normalized) = validation {
                ids.formUnion(normalized.temporaryIdsToResolve.keys)
                ids.formUnion(normalized.creates.map(\.temporaryId))
            }
            let known = try await SeqLedger.mappings(ids, device: device, on: connection, logger: logger)
            let digest = ledger.digest(changeSet, known: known)
            if let seq = changeSet.seq {
                if seq <= last {
                    return try await Self.storedOutcome(seq: seq, last: last, digest: digest, sent: changeSet, device: device, on: connection, logger: logger)
                }
                guard seq == last + 1 else {
                    throw SyncError(.sequenceGap, "change set seq \(seq) skips ahead: the next expected seq is \(last + 1)", expected: last + 1)
                }
            }
            let normalized: NormalizedChangeSet
            switch validation {
            case .failure(let reason):
                try await Self.recordRejection(reason, changeSet, digest: digest, device: device, on: connection, logger: logger)
                return .rejected(reason, changeSet)
            case .success(let value):
                normalized = value
            }
            try await connection.run("SAVEPOINT change_set", logger)
            do {
                let entry = try await writer.write(normalized, known: known, digest: digest, on: connection)
                return .applied(revision: entry.revision, seq: changeSet.seq, entry: entry)
            } catch {
                guard let reason = Self.conflict(from: error) else { throw error }
                try await connection.run("ROLLBACK TO SAVEPOINT change_set", logger)
                try await Self.recordRejection(reason, changeSet, digest: digest, device: device, on: connection, logger: logger)
                return .rejected(reason, changeSet)
            }
        }
    }

    /// Locks the device's row for the transaction and returns its last seq.
    ///
    /// With a seq, the lock serialises the device's change sets (`FOR NO KEY UPDATE`, which
    /// the log's foreign key check does not wait for); without one a shared lock is
    /// enough. Either way a revocation, which updates the row, waits for the change set,
    /// and a change set that comes after it sees the revocation and is refused.
    private static func lockDevice(_ device: Device, forSeq: Bool, on connection: PostgresConnection, logger: Logger) async throws -> Int64 {
        let rows = try await connection.rows(
            forSeq
                ? "SELECT last_seq, revoked_at IS NOT NULL FROM revsync_devices WHERE id = \(device.id) FOR NO KEY UPDATE"
                : "SELECT last_seq, revoked_at IS NOT NULL FROM revsync_devices WHERE id = \(device.id) FOR SHARE",
            logger)
        guard let row = rows.first else { throw SyncError(.unauthorized, "the device no longer exists") }
        let (last, revoked) = try row.decode((Int64, Bool).self)
        if revoked { throw DeviceStore.revokedError }
        return last
    }

    /// A conflict decided by the rules, or a constraint PostgreSQL enforced as a safety net.
    private static func conflict(from error: any Error) -> ConflictReason? {
        if let reason = error as? ConflictReason { return reason }
        guard let error = error as? PSQLError, let state = error.sqlState else { return nil }
        let detail = error.serverInfo?[.detail] ?? error.serverInfo?[.message] ?? ""
        switch state {
        case "23503": return ConflictReason(code: .reference, entity: error.serverInfo?[.tableName], id: nil, message: "a referenced record does not exist: \(detail)")
        case "23505": return ConflictReason(code: .invalid, entity: error.serverInfo?[.tableName], id: nil, message: "a unique value is already taken: \(detail)")
        case let state where state.hasPrefix("22") || state.hasPrefix("23"):
            return ConflictReason(code: .invalid, entity: error.serverInfo?[.tableName], id: nil, message: "PostgreSQL refused a value: \(error.serverInfo?[.message] ?? state)")
        default: return nil
        }
    }

    private static func recordRejection(
        _ reason: ConflictReason, _ changeSet: ChangeSet, digest: [UInt8], device: Device, on connection: PostgresConnection, logger: Logger
    ) async throws {
        guard let seq = changeSet.seq else { return }
        let reasonText = String(decoding: try JSONEncoder().encode(reason), as: UTF8.self)
        let digestBytes = ByteBuffer(bytes: digest)
        // The change set itself is not kept: a retry must carry the same content (its digest), so the
        // retry's own copy serves for the fresh corrective set. head_at lets the pruner drop it with the log.
        try await connection.run(
            """
            INSERT INTO revsync_outcomes (device_id, seq, reason, digest, head_at)
            SELECT \(device.id), \(seq), \(reasonText), \(digestBytes), head FROM revsync_head
            """, logger)
        try await connection.run("UPDATE revsync_devices SET last_seq = \(seq) WHERE id = \(device.id)", logger)
    }

    /// The outcome a repeated seq gets again, once its content is known to be the same change set.
    private static func storedOutcome(
        seq: Int64, last: Int64, digest: [UInt8], sent: ChangeSet, device: Device, on connection: PostgresConnection, logger: Logger
    ) async throws -> ApplyOutcome {
        let rows = try await connection.rows(
            "SELECT revision, reason, change_set, digest FROM revsync_outcomes WHERE device_id = \(device.id) AND seq = \(seq)", logger)
        let row = rows.first
        let stored = try row?.decode((Int64?, String?, String?, ByteBuffer?).self)
        let storedDigest: [UInt8]?? = stored.map { $0.3.map { Array($0.readableBytesView) } }
        if let problem = SeqLedger.mismatch(stored: storedDigest, sent: digest) {
            let lowest = try await SeqLedger.lowestTemporaryId(device: device, on: connection, logger: logger)
            throw SeqLedger.reused(seq: seq, last: last, lowestTemporaryId: lowest, why: problem)
        }
        guard let (revision, reasonText, changeSetText, _) = stored else {
            throw SyncError(.internal, "no stored outcome for seq \(seq) of device \(device.publicId)")
        }
        if let revision { return .repeated(revision: revision, seq: seq) }
        let decoder = JSONDecoder()
        let reason = try decoder.decode(ConflictReason.self, from: Data((reasonText ?? "").utf8))
        // Outcomes from before digests kept the change set; newer ones are the same as the one sent.
        let changeSet = try changeSetText.map { try decoder.decode(ChangeSet.self, from: Data($0.utf8)) } ?? sent
        return .repeatedRejection(reason, changeSet)
    }
}
