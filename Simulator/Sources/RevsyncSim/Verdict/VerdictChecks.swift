import Foundation

/// The verdict's checks as pure functions of what was gathered: each returns one
/// `VerdictCheck` whose detail says what was measured or, on a violation, the
/// first few offenders.
public enum VerdictChecks {
    /// The checks' names, stable across runs so reports can be compared.
    public enum Name {
        public static let devicesEqual = "devices equal PostgreSQL"
        public static let lostChangeSets = "lost change sets"
        public static let acknowledgedContent = "acknowledged content"
        public static let duplicateRecords = "duplicate records"
        public static let gapFreeLog = "gap-free log"
        public static let revisionRegressions = "revision regressions"
        public static let rejectionsDelivered = "rejections delivered"
        public static let revokedTokens = "revoked tokens"
        public static let liveness = "liveness"
        public static let splitRequests = "split requests"
        public static let servedWhileRefused = "served while PostgreSQL refused"
        public static let snapshotDirectory = "snapshot directory"
        public static let rotatedTokens = "rotated tokens"
        public static let schemaUpgrade = "schema upgrade"
        public static let databaseRestore = "database restore"
        public static let redisPartitions = "subscribed again after a cut from Redis"
        public static let silentPostgresPaths = "PostgreSQL connections that died silently given up"
        public static let frozenPostgres = "answered while PostgreSQL was frozen"
    }

    /// Every instance cut from Redis made its Redis subscription anew after the heal, within
    /// ``PartitionRecovery/bound``: one that kept the subscription it had before would never hear
    /// the other instances' commits again if its path died without a word.
    public static func redisPartitions(_ recoveries: [PartitionRecovery]) -> VerdictCheck {
        guard !recoveries.isEmpty else {
            return VerdictCheck(name: Name.redisPartitions, passed: false, detail: "no instance was cut from Redis: the partition did not happen")
        }
        let judged = recoveries.filter { !$0.restarted }
        let restarted = recoveries.count - judged.count
        let aside = restarted > 0 ? "; \(restarted) not judged (the instance was restarted after the cut began)" : ""
        guard !judged.isEmpty else {
            return VerdictCheck(
                name: Name.redisPartitions, passed: false,
                detail: "every instance cut from Redis was restarted before it showed a new subscription: no cut was judged" + aside)
        }
        let stuck = judged.filter { $0.secondsAfterHeal == nil }
        guard stuck.isEmpty else {
            return VerdictCheck(
                name: Name.redisPartitions, passed: false,
                detail: "\(stuck.count) of \(judged.count) instances cut from Redis had no subscription made after the cut "
                    + "\(Int(PartitionRecovery.bound.inSeconds)) s after the heal: "
                    + list(stuck.map { "instance \($0.instance) (\($0.cut.rawValue))" }) + aside)
        }
        let kinds = Dictionary(grouping: judged, by: \.cut.rawValue).map { "\($0.value.count) \($0.key)" }.sorted()
        let slowest = judged.compactMap(\.secondsAfterHeal).max() ?? 0
        return VerdictCheck(
            name: Name.redisPartitions, passed: true,
            detail: "\(judged.count) cut\(judged.count == 1 ? "" : "s") (\(kinds.joined(separator: ", "))): each instance subscribed to Redis anew, "
                + "at most \(String(format: "%.1f", slowest)) s after the heal" + aside)
    }

    /// Every instance whose PostgreSQL connections died silently gave them up within
    /// ``SilentPathRecovery/bound``, and so did PostgreSQL: kept, they would fill the instance's
    /// pool (every request `503` for a quarter of an hour) and hold their backends' locks.
    public static func silentPostgresPaths(_ recoveries: [SilentPathRecovery]) -> VerdictCheck {
        let name = Name.silentPostgresPaths
        let judged = recoveries.filter { !$0.restarted }
        let aside = judged.count < recoveries.count ? "; \(recoveries.count - judged.count) not judged (the instance was restarted meanwhile)" : ""
        guard !judged.isEmpty else {
            return VerdictCheck(name: name, passed: false, detail: "no instance's connections to PostgreSQL were made silent and watched" + aside)
        }
        let bound = Int(SilentPathRecovery.bound.inSeconds)
        let kept = judged.filter { $0.instanceClosedAfter == nil || $0.postgresEndedAfter == nil }
        guard kept.isEmpty else {
            return VerdictCheck(
                name: name, passed: false,
                detail: "\(kept.count) of \(judged.count) silent paths were not given up within \(bound) s: "
                    + list(kept.map { recovery in
                        let ends = [recovery.instanceClosedAfter == nil ? "the instance" : nil, recovery.postgresEndedAfter == nil ? "PostgreSQL" : nil]
                        return "instance \(recovery.instance) (\(recovery.connections) connections; kept by \(ends.compactMap { $0 }.joined(separator: " and ")))"
                    }) + aside)
        }
        let connections = judged.map(\.connections).reduce(0, +)
        let instance = judged.compactMap(\.instanceClosedAfter).max() ?? 0, postgres = judged.compactMap(\.postgresEndedAfter).max() ?? 0
        return VerdictCheck(
            name: name, passed: true,
            detail: "\(judged.count) time\(judged.count == 1 ? "" : "s"), \(connections) connections: the instance closed them at most "
                + String(format: "%.1f", instance) + " s after, PostgreSQL ended their backends at most " + String(format: "%.1f", postgres) + " s after" + aside)
    }

    /// Every `GET /ready` asked while PostgreSQL was frozen was answered before it continued
    /// (`FrozenPostgres`): a request whose statement went into the frozen PostgreSQL must not
    /// wait for as long as the freeze lasts.
    public static func frozenPostgres(_ freezes: [FrozenPostgres]) -> VerdictCheck {
        let name = Name.frozenPostgres
        let probes = freezes.flatMap(\.probes)
        guard !probes.isEmpty else {
            return VerdictCheck(name: name, passed: false, detail: freezes.isEmpty ? "PostgreSQL was not frozen" : "no instance was asked while PostgreSQL was frozen")
        }
        let unanswered = freezes.flatMap(\.unanswered)
        guard unanswered.isEmpty else {
            return VerdictCheck(
                name: name, passed: false,
                detail: "\(unanswered.count) of \(probes.count) GET /ready were not answered while PostgreSQL was frozen: "
                    + list(unanswered.map { probe in
                        let answer = probe.answer.status.map { "answered \($0) after " + String(format: "%.1f s", probe.answeredAfter) } ?? "no answer"
                        return "instance \(probe.instance), asked " + String(format: "%.1f s", probe.sentAfter) + " into the freeze: \(answer)"
                    }))
        }
        let span = freezes.map(\.frozenFor).min() ?? 0, slowest = probes.map(\.answeredAfter).max() ?? 0
        return VerdictCheck(
            name: name, passed: true,
            detail: "\(freezes.count) freeze\(freezes.count == 1 ? "" : "s") of at least " + String(format: "%.0f s", span)
                + ": all \(probes.count) GET /ready answered before PostgreSQL continued (\(FrozenPostgres.describe(probes))), the slowest after "
                + String(format: "%.1f s", slowest))
    }

    /// After the database was restored from a backup under the running servers: its history id
    /// was renewed (the restore put the backup's back), and every device holds the new one (it
    /// loaded the restored database rather than catch up past revisions the restore took away;
    /// that its records equal PostgreSQL's, "devices equal PostgreSQL" says).
    /// - Parameters:
    ///   - lostAcknowledgements: acknowledgements of revisions the restore took away, set apart
    ///     from "lost change sets" and "acknowledged content".
    ///   - regressions: devices' revisions that went back from above the restore point, set apart
    ///     from "revision regressions".
    static func databaseRestore(
        _ point: RestorePoint?, current: String?, deviceHistories: [String?], lostAcknowledgements: Int, regressions: Int
    ) -> VerdictCheck {
        guard let point else {
            return VerdictCheck(name: Name.databaseRestore, passed: false, detail: "the database was not restored: the fault did not happen")
        }
        guard let current, !point.histories.contains(current) else {
            let which = current == point.history ? "the backup's" : "the one the first restore was renewed to"
            return VerdictCheck(
                name: Name.databaseRestore, passed: false,
                detail: "the history id is still \(which) (\(current ?? "unread")): no instance renewed it after the restore"
                    + (point.restores > 1 ? " of the same backup again" : "") + ", and devices caught up past revisions it took away")
        }
        let others = deviceHistories.filter { $0 != current }
        guard others.isEmpty else {
            return VerdictCheck(
                name: Name.databaseRestore, passed: false,
                detail: "\(others.count) of \(deviceHistories.count) devices hold another history id than the database's \(current): "
                    + list(others.map { $0 ?? "none" }))
        }
        return VerdictCheck(
            name: Name.databaseRestore, passed: true,
            detail: "restored to revision \(point.head)" + (point.restores > 1 ? " \(point.restores) times (the backup's older id renewed again)" : "")
                + "; history id renewed, held by all \(deviceHistories.count) devices; "
                + "\(lostAcknowledgements) acknowledgements of revisions the restore took away and \(regressions) revisions that went "
                + "back with it set apart from the other checks")
    }

    /// After a rolling schema upgrade: devices learned the new attribute and wrote it (change
    /// sets committed with it), and no change set was rejected for naming it (an instance not
    /// upgraded yet must ask for it again, not reject it and have the device undo the edit).
    static func schemaUpgrade(_ audit: SchemaUpgrade.Audit) -> VerdictCheck {
        let name = "\(SchemaUpgrade.entity).\(SchemaUpgrade.attribute)"
        if audit.rejected > 0 {
            return VerdictCheck(
                name: Name.schemaUpgrade, passed: false,
                detail: "\(audit.rejected) change sets rejected for naming \(name), each an edit undone on its device")
        }
        guard audit.written > 0 else {
            return VerdictCheck(
                name: Name.schemaUpgrade, passed: false, detail: "no change set committed a value of \(name): no device learned the new schema")
        }
        return VerdictCheck(
            name: Name.schemaUpgrade, passed: true,
            detail: "\(audit.written) change sets committed with \(name) (\(audit.held) records hold it now), none rejected for it")
    }

    /// For every device whose token the run rotated: no request it sent with its old token
    /// once the rotation had had one second to reach every instance got a 2xx answer, until
    /// it was given the new one (that it then converges, the other checks say).
    public static func rotatedTokens(_ devices: [RevokedDevice]) -> VerdictCheck {
        guard !devices.isEmpty else {
            return VerdictCheck(name: Name.rotatedTokens, passed: false, detail: "no token was rotated: the rotation did not happen")
        }
        let accepted = devices.filter { $0.accepted > 0 }
        guard accepted.isEmpty else {
            return VerdictCheck(
                name: Name.rotatedTokens, passed: false,
                detail: "\(accepted.count) rotated devices' old tokens got 2xx answers: " + list(accepted))
        }
        let refused = devices.reduce(0) { $0 + $1.refused }
        let other = devices.reduce(0) { $0 + $1.other }
        var detail = "\(devices.count) devices' tokens rotated: \(refused) requests with the old token refused with 401"
        if other > 0 { detail += ", \(other) unanswered or other errors" }
        return VerdictCheck(name: Name.rotatedTokens, passed: true, detail: detail + ", none accepted, until each was given its new token")
    }

    /// The snapshot directory the instances share holds no work directory of an instance that
    /// is gone (`leftByKills`: those found unlocked right after a kill), and no replaced file
    /// past its grace and a sweep.
    public static func snapshotDirectory(_ audit: SnapshotDirectoryAudit, leftByKills: Set<String>) -> VerdictCheck {
        let overdue = audit.overdue
        let groups = Set(audit.published.map(\.group)).count
        var detail = "\(audit.published.count) published files (\(groups) databases and schema versions), "
            + "none replaced more than \(Int(SnapshotDirectoryAudit.overdueAfter)) s ago; "
            + "\(audit.locked) work directories, all locked by running instances"
        let stillLeft = leftByKills.intersection(audit.abandoned)
        if !leftByKills.isEmpty { detail += "; \(leftByKills.count - stillLeft.count) of \(leftByKills.count) left by killed instances removed" }
        var problems: [String] = []
        if !overdue.isEmpty { problems.append("\(overdue.count) replaced files outstayed their grace: " + list(overdue)) }
        if !audit.abandoned.isEmpty {
            problems.append("\(audit.abandoned.count) work directories of instances that are gone were not removed: " + list(audit.abandoned))
        }
        guard problems.isEmpty else { return VerdictCheck(name: Name.snapshotDirectory, passed: false, detail: problems.joined(separator: "; ")) }
        return VerdictCheck(name: Name.snapshotDirectory, passed: true, detail: detail)
    }

    /// Every probe of `/ready` asked while PostgreSQL refused the servers more connections
    /// was answered 200: the pools went on serving from the connections they held.
    public static func servedWhileRefused(_ answers: [ReadinessAnswer]) -> VerdictCheck {
        guard !answers.isEmpty else {
            return VerdictCheck(name: Name.servedWhileRefused, passed: false, detail: "no probe was asked: the refusal did not happen")
        }
        let failed = answers.filter { $0.status != 200 }
        let slowest = answers.map(\.seconds).max() ?? 0
        var detail = "\(answers.count - failed.count) of \(answers.count) probes of /ready answered 200 while PostgreSQL refused "
            + "the servers more connections, the slowest in \(String(format: "%.2f", slowest)) s"
        if !failed.isEmpty {
            detail += "; not served: " + list(failed.map { answer in
                (answer.status.map { "\($0)" } ?? answer.error ?? "no answer") + String(format: " after %.2f s", answer.seconds)
            })
        }
        return VerdictCheck(name: Name.servedWhileRefused, passed: failed.isEmpty, detail: detail)
    }

    /// No request that reached two server instances at once was answered two ways.
    public static func splitRequests(_ tally: SplitAudit.Tally) -> VerdictCheck {
        guard tally.splits > 0 else {
            return VerdictCheck(name: Name.splitRequests, passed: true, detail: "no request split (it needs two server instances or more)")
        }
        let compared = tally.agreed + tally.disagreements.count
        var detail = "\(tally.agreed) of \(compared) split requests with change sets answered alike by both instances, "
            + "\(tally.splits - compared) not compared (an error, a lost answer, or no change set)"
        if !tally.disagreements.isEmpty { detail += "; " + tally.disagreements.prefix(examples).joined(separator: "; ") }
        return VerdictCheck(name: Name.splitRequests, passed: tally.disagreements.isEmpty, detail: detail)
    }

    /// How many offenders a detail lists before "…".
    static let examples = 3

    /// Every device's records equal PostgreSQL's, entity by entity.
    public static func devicesEqual(_ comparison: DeviceComparison) -> VerdictCheck {
        let records = comparison.postgres.reduce(0) { $0 + $1.count }
        let entities = comparison.postgres.count
        let left = comparison.notCompared > 0 ? "; \(comparison.notCompared) revoked devices not compared" : ""
        guard let first = comparison.mismatches.first else {
            return VerdictCheck(
                name: Name.devicesEqual, passed: true,
                detail: "\(comparison.devices) devices equal to PostgreSQL (\(entities) entities, \(records) records)" + left)
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
        return VerdictCheck(name: Name.devicesEqual, passed: false, detail: detail + left)
    }

    /// Every change set a device saw acknowledged is in the log.
    public static func lostChangeSets(acknowledged: Set<ChangeSetRef>, committed: Set<ChangeSetRef>) -> VerdictCheck {
        let lost = acknowledged.subtracting(committed).sorted()
        var detail = "lost \(lost.count) of \(acknowledged.count) acknowledged"
        if !lost.isEmpty { detail += ": " + list(lost) }
        return VerdictCheck(name: Name.lostChangeSets, passed: lost.isEmpty, detail: detail)
    }

    /// The log entry at every acknowledged revision holds what the device sent under that
    /// seq, every seq a device took as acknowledged was sent and acknowledged as such, and
    /// no device got another device's change set in the author's form.
    public static func acknowledgedContent(_ audit: ContentAudit) -> VerdictCheck {
        let compared = audit.acknowledged - audit.pruned
        var detail = "\(compared - audit.mismatches.count) of \(compared) acknowledged change sets hold what their device sent"
        if audit.pruned > 0 { detail += " (\(audit.pruned) pruned, not compared)" }
        if !audit.mismatches.isEmpty { detail += "; differ: " + list(audit.mismatches) }
        if !audit.unsent.isEmpty { detail += "; taken as acknowledged but never sent and acknowledged: " + list(audit.unsent) }
        if !audit.foreignAuthorForms.isEmpty {
            detail += "; another device's change set in the author's form: " + list(audit.foreignAuthorForms)
        }
        return VerdictCheck(
            name: Name.acknowledgedContent, passed: audit.mismatches.isEmpty && audit.unsent.isEmpty && audit.foreignAuthorForms.isEmpty,
            detail: detail)
    }

    /// Nothing was committed for a revoked device since its revocation, and its token
    /// got no 2xx answer once the revocation had had time to reach every instance.
    /// - Parameters:
    ///   - audit: PostgreSQL's revocations; nil when it has no `revoked_at` column.
    ///   - devices: the devices the run revoked, with the answers their tokens got since.
    public static func revokedTokens(_ audit: RevocationAudit?, devices: [RevokedDevice]) -> VerdictCheck {
        let revokedInPostgres = audit?.revoked.count ?? 0
        guard !devices.isEmpty || revokedInPostgres > 0 || !(audit?.commitsAfter.isEmpty ?? true) else {
            return VerdictCheck(name: Name.revokedTokens, passed: true, detail: "no device revoked")
        }
        var problems: [String] = []
        if let audit {
            let unknown = devices.filter { !audit.revoked.contains($0.device) }.map(\.device).sorted()
            if !unknown.isEmpty { problems.append("\(unknown.count) revoked devices not revoked in PostgreSQL: " + list(unknown)) }
            if !audit.commitsAfter.isEmpty {
                problems.append("\(audit.commitsAfter.count) revoked devices have change sets committed since: " + list(audit.commitsAfter))
            }
        } else {
            problems.append("revsync_devices has no revoked_at column: what was committed after a revocation cannot be told")
        }
        let accepted = devices.filter { $0.accepted > 0 }
        if !accepted.isEmpty { problems.append("\(accepted.count) revoked devices got 2xx answers: " + list(accepted)) }
        guard problems.isEmpty else { return VerdictCheck(name: Name.revokedTokens, passed: false, detail: problems.joined(separator: "; ")) }
        let refused = devices.reduce(0) { $0 + $1.refused }
        let other = devices.reduce(0) { $0 + $1.other }
        let early = devices.reduce(0) { $0 + $1.acceptedWithinBound }
        var detail = "\(devices.count) revoked devices: \(refused) requests refused with 401"
        if other > 0 { detail += ", \(other) unanswered or other errors" }
        detail += ", none accepted"
        if early > 0 { detail += " (\(early) accepted within \(Int(RevocationWatch.propagationBound.inSeconds)) s of the revocation)" }
        detail += "; nothing committed since (\(revokedInPostgres) revoked in PostgreSQL)"
        return VerdictCheck(name: Name.revokedTokens, passed: true, detail: detail)
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
    /// - Parameter excused: change sets whose answer the device cannot have had: still
    ///   pending on a revoked device (every later request was refused), or abandoned by a restore.
    public static func rejectionsDelivered(
        _ rejections: [ServerRejection], delivered: Set<ChangeSetRef>, excused: Set<ChangeSetRef> = []
    ) -> VerdictCheck {
        let undelivered = rejections.filter { !delivered.contains($0.changeSet) }
        let missing = undelivered.filter { !excused.contains($0.changeSet) }
        var detail = "\(rejections.count - undelivered.count) of \(rejections.count) rejections delivered"
        if undelivered.count > missing.count {
            detail += ", \(undelivered.count - missing.count) excused (pending on revoked devices or lost with a restore)"
        }
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
