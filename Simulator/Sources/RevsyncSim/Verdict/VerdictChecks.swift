/// The verdict's checks as pure functions of what was gathered: each returns one
/// `VerdictCheck` whose detail says what was measured or, on a violation, the
/// first few offenders.
public enum VerdictChecks {
    /// The checks' names, stable across runs so reports can be compared.
    public enum Name {
        public static let devicesEqual = "devices equal PostgreSQL"
        public static let lostChangeSets = "lost change sets"
        public static let duplicateRecords = "duplicate records"
        public static let gapFreeLog = "gap-free log"
        public static let revisionRegressions = "revision regressions"
        public static let rejectionsDelivered = "rejections delivered"
        public static let liveness = "liveness"
    }

    /// How many offenders a detail lists before "…".
    static let examples = 3

    /// Every device's records equal PostgreSQL's, entity by entity.
    public static func devicesEqual(_ comparison: DeviceComparison) -> VerdictCheck {
        let records = comparison.postgres.reduce(0) { $0 + $1.count }
        let entities = comparison.postgres.count
        guard let first = comparison.mismatches.first else {
            return VerdictCheck(
                name: Name.devicesEqual, passed: true,
                detail: "\(comparison.devices) devices equal to PostgreSQL (\(entities) entities, \(records) records)")
        }
        let devices = Set(comparison.mismatches.map(\.device)).count
        var detail = "\(devices) of \(comparison.devices) devices differ (\(comparison.mismatches.count) entity digests); "
        detail += "first: device \(first.device), \(first.entity): "
        if let error = first.error {
            detail += "unreadable (\(error))"
        } else if let mine = first.deviceDigest, mine.count == first.postgresDigest.count {
            detail += "\(mine.count) records on both sides, contents differ"
        } else {
            detail += "\(first.deviceDigest?.count ?? 0) records vs PostgreSQL's \(first.postgresDigest.count)"
        }
        if let difference = comparison.firstDifference { detail += "; " + difference }
        return VerdictCheck(name: Name.devicesEqual, passed: false, detail: detail)
    }

    /// Every change set a device saw acknowledged is in the log.
    public static func lostChangeSets(acknowledged: Set<ChangeSetRef>, committed: Set<ChangeSetRef>) -> VerdictCheck {
        let lost = acknowledged.subtracting(committed).sorted()
        var detail = "lost \(lost.count) of \(acknowledged.count) acknowledged"
        if !lost.isEmpty { detail += ": " + list(lost) }
        return VerdictCheck(name: Name.lostChangeSets, passed: lost.isEmpty, detail: detail)
    }

    /// No temporary id became two records, and no change set was committed twice.
    public static func duplicateRecords(_ duplicates: [DuplicateTemporaryId], repeated: [ChangeSetRef] = []) -> VerdictCheck {
        guard !duplicates.isEmpty || !repeated.isEmpty else {
            return VerdictCheck(name: Name.duplicateRecords, passed: true, detail: "0 duplicates")
        }
        var parts: [String] = []
        if !duplicates.isEmpty { parts.append("\(duplicates.count) temporary ids made more than one record: " + list(duplicates)) }
        if !repeated.isEmpty { parts.append("\(repeated.count) change sets committed more than once: " + list(repeated)) }
        return VerdictCheck(name: Name.duplicateRecords, passed: false, detail: parts.joined(separator: "; "))
    }

    /// The retained log holds each revision from horizon+1 to head exactly once.
    public static func gapFreeLog(_ gaps: LogGaps) -> VerdictCheck {
        let range = gaps.head > gaps.horizon ? "\(gaps.horizon + 1)…\(gaps.head)" : "none (head \(gaps.head))"
        var problems: [String] = []
        if let first = gaps.firstMissing { problems.append("first missing revision \(first) (\(gaps.missing) missing)") }
        if gaps.outOfRange > 0 { problems.append("\(gaps.outOfRange) entries outside the range") }
        let detail = problems.isEmpty ? "revisions \(range) present once each" : "revisions \(range): " + problems.joined(separator: ", ")
        return VerdictCheck(name: Name.gapFreeLog, passed: problems.isEmpty && gaps.missing == 0, detail: detail)
    }

    /// No device's maxRevision ever went down.
    public static func revisionRegressions(_ regressions: [RevisionRegression]) -> VerdictCheck {
        var detail = "\(regressions.count) regressions"
        if !regressions.isEmpty { detail += ": " + list(regressions) }
        return VerdictCheck(name: Name.revisionRegressions, passed: regressions.isEmpty, detail: detail)
    }

    /// Every change set the server rejected reached its device as a conflict.
    public static func rejectionsDelivered(_ rejections: [ServerRejection], delivered: Set<ChangeSetRef>) -> VerdictCheck {
        let missing = rejections.filter { !delivered.contains($0.changeSet) }
        var detail = "\(rejections.count - missing.count) of \(rejections.count) rejections delivered"
        if !missing.isEmpty {
            detail += "; not delivered: " + list(missing.map { "\($0.changeSet) (\($0.code))" })
        }
        return VerdictCheck(name: Name.rejectionsDelivered, passed: missing.isEmpty, detail: detail)
    }

    /// Every device ended with an empty outbox at the server's head.
    public static func liveness(_ lagging: [DeviceLag], devices: Int, head: Int64) -> VerdictCheck {
        var detail = "\(devices - lagging.count) of \(devices) devices at head \(head) with nothing pending"
        if !lagging.isEmpty { detail += "; behind: " + list(lagging) }
        return VerdictCheck(name: Name.liveness, passed: lagging.isEmpty, detail: detail)
    }

    /// The first `examples` items, then how many more.
    static func list<T: CustomStringConvertible>(_ items: [T]) -> String {
        var text = items.prefix(examples).map(\.description).joined(separator: "; ")
        if items.count > examples { text += "; … \(items.count - examples) more" }
        return text
    }
}
