import RevsyncWire

/// What the server knows of a stored record's write history, enough for the conflict rule.
public struct RecordVersion: Sendable, Hashable {
    /// The revision that last wrote the record.
    public let revision: Int64
    /// The device that last wrote it.
    public let writer: Int64
    /// The latest revision written by a device other than `writer` (0 if none).
    public let otherRevision: Int64

    public init(revision: Int64, writer: Int64, otherRevision: Int64) {
        self.revision = revision
        self.writer = writer
        self.otherRevision = otherRevision
    }

    /// The history after `device` writes it at `revision`.
    public func written(by device: Int64, at revision: Int64) -> RecordVersion {
        RecordVersion(revision: revision, writer: device, otherRevision: device == writer ? otherRevision : self.revision)
    }

    /// The history of a record `device` creates at `revision`.
    public static func created(by device: Int64, at revision: Int64) -> RecordVersion {
        RecordVersion(revision: revision, writer: device, otherRevision: 0)
    }
}

/// The case study's rule: nobody overwrites a change they have not seen.
public enum ConflictRules {
    /// Whether `device` may write a record it last saw at `basis`.
    ///
    /// It may when nothing was written since `basis`, or when every write since
    /// came from the device itself (its own unacknowledged change sets). The
    /// latest write by anyone else is `otherRevision` when the device wrote last,
    /// and `revision` otherwise.
    public static func mayWrite(_ version: RecordVersion, basis: Int64, device: Int64) -> Bool {
        if version.revision == basis { return true }
        let latestForeignWrite = version.writer == device ? version.otherRevision : version.revision
        return latestForeignWrite <= basis
    }

    /// The conflict, if any, of updating or deleting `key` (nil `version`: it does not exist).
    public static func check(
        _ key: RecordKey, basis: Int64, version: RecordVersion?, device: Int64, operation: String
    ) -> ConflictReason? {
        guard let version else {
            return ConflictReason(code: .notFound, entity: key.entity, id: key.id, message: "\(key) no longer exists; cannot \(operation) it")
        }
        guard mayWrite(version, basis: basis, device: device) else {
            return ConflictReason(
                code: .staleRevision, entity: key.entity, id: key.id,
                message: "\(key) is at revision \(version.revision) but the change was made on revision \(basis)")
        }
        return nil
    }
}

extension ConflictRules {
    /// The rejection a constraint the database enforced stands for (a safety net under the
    /// rules above: a foreign key, a unique value, a value the column refuses), by its SQLSTATE;
    /// nil for a failure that rejects nothing (the request fails instead).
    public static func enforcedByDatabase(sqlState: String, table: String?, detail: String, message: String?) -> ConflictReason? {
        switch sqlState {
        case "23503": ConflictReason(code: .reference, entity: table, id: nil, message: "a referenced record does not exist: \(detail)")
        case "23505": ConflictReason(code: .invalid, entity: table, id: nil, message: "a unique value is already taken: \(detail)")
        case let state where state.hasPrefix("22") || state.hasPrefix("23"):
            ConflictReason(code: .invalid, entity: table, id: nil, message: "PostgreSQL refused a value: \(message ?? state)")
        // A limit of PostgreSQL's own (class 54), met by a change set alone: a value too
        // large for an index added by hand, say. Failing the request instead would fail the
        // device's every retry, and every batch it joins.
        case let state where state.hasPrefix("54"):
            ConflictReason(code: .invalid, entity: table, id: nil, message: "PostgreSQL cannot store this change set: \(message ?? state)")
        default: nil
        }
    }
}
