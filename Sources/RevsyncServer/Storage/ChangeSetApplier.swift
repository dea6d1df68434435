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
    var delayBeforeRevision: ApplyDelay? = nil

    /// SQLSTATEs that mean "run the whole transaction again".
    private static let retryableStates: Set<String> = ["40001", "40P01"]

    func apply(_ changeSet: ChangeSet, device: Device) async throws -> ApplyOutcome {
        let validation = ChangeSetValidator(schema: schema, role: device.role).validate(changeSet)
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
        let writer = ChangeSetWriter(schema: schema, device: device, logger: logger, delayBeforeRevision: delayBeforeRevision)
        return try await database.transaction { connection in
            if let seq = changeSet.seq {
                let rows = try await connection.rows("SELECT last_seq FROM revsync_devices WHERE id = \(device.id) FOR UPDATE", logger)
                let last = try rows.first?.decode(Int64.self) ?? 0
                if seq <= last { return try await Self.storedOutcome(seq: seq, device: device, on: connection, logger: logger) }
                guard seq == last + 1 else {
                    throw SyncError(.sequenceGap, "change set seq \(seq) skips ahead: the next expected seq is \(last + 1)", expected: last + 1)
                }
            }
            let normalized: NormalizedChangeSet
            switch validation {
            case .failure(let reason):
                try await Self.recordRejection(reason, changeSet, device: device, on: connection, logger: logger)
                return .rejected(reason, changeSet)
            case .success(let value):
                normalized = value
            }
            try await connection.run("SAVEPOINT change_set", logger)
            do {
                let entry = try await writer.write(normalized, on: connection)
                return .applied(revision: entry.revision, seq: changeSet.seq, entry: entry)
            } catch {
                guard let reason = Self.conflict(from: error) else { throw error }
                try await connection.run("ROLLBACK TO SAVEPOINT change_set", logger)
                try await Self.recordRejection(reason, changeSet, device: device, on: connection, logger: logger)
                return .rejected(reason, changeSet)
            }
        }
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
        _ reason: ConflictReason, _ changeSet: ChangeSet, device: Device, on connection: PostgresConnection, logger: Logger
    ) async throws {
        guard let seq = changeSet.seq else { return }
        let encoder = JSONEncoder()
        let reasonText = String(decoding: try encoder.encode(reason), as: UTF8.self)
        let changeSetText = String(decoding: try encoder.encode(changeSet), as: UTF8.self)
        try await connection.run(
            """
            INSERT INTO revsync_outcomes (device_id, seq, reason, change_set) VALUES (\(device.id), \(seq), \(reasonText), \(changeSetText))
            """, logger)
        try await connection.run("UPDATE revsync_devices SET last_seq = \(seq) WHERE id = \(device.id)", logger)
    }

    private static func storedOutcome(seq: Int64, device: Device, on connection: PostgresConnection, logger: Logger) async throws -> ApplyOutcome {
        let rows = try await connection.rows(
            "SELECT revision, reason, change_set FROM revsync_outcomes WHERE device_id = \(device.id) AND seq = \(seq)", logger)
        guard let row = rows.first else {
            throw SyncError(.internal, "no stored outcome for seq \(seq) of device \(device.publicId)")
        }
        let (revision, reasonText, changeSetText) = try row.decode((Int64?, String?, String?).self)
        if let revision { return .repeated(revision: revision, seq: seq) }
        let decoder = JSONDecoder()
        let reason = try decoder.decode(ConflictReason.self, from: Data((reasonText ?? "").utf8))
        let changeSet = try decoder.decode(ChangeSet.self, from: Data((changeSetText ?? "").utf8))
        return .repeatedRejection(reason, changeSet)
    }
}
