import Logging
import RevsyncDevice
import RevsyncRules

/// Gathers the verdict after a run: PostgreSQL's state and log (one snapshot),
/// then each device in turn, and builds the checks.
///
/// ```swift
/// let evidence = try await VerdictGatherer(databaseURL: url).gather(
///     devices: engines, acknowledged: acknowledgedPairs, regressions: regressions,
///     acknowledgedContent: sentAndAcknowledged, revoked: revokedDevices)
/// report.verdict = VerdictSummary(checks: evidence.checks)
/// ```
///
/// Memory stays at one entity of one device: each device is digested entity by
/// entity and its records dropped; only the first mismatch is read again, on
/// both sides, to show the first differing record.
public struct VerdictGatherer: Sendable {
    public var databaseURL: String
    public var logger: Logger

    public init(databaseURL: String, logger: Logger = Logger(label: "revsync.sim.verdict")) {
        self.databaseURL = databaseURL
        self.logger = logger
    }

    /// The checks, in a stable order.
    /// - Parameters:
    ///   - devices: the run's devices, open and no longer syncing.
    ///   - acknowledged: the (device, seq) pairs the devices saw acknowledged during the run.
    ///   - regressions: the maxRevision decreases the devices showed during the run.
    ///   - acknowledgedContent: what the devices sent under each acknowledged seq, with the acknowledged revision;
    ///     every pair in `acknowledged` must be among them. Nil: not recorded, so nothing of this is checked.
    ///   - revoked: the devices the run revoked: left out of the comparison with PostgreSQL
    ///     and of liveness (they cannot converge), checked for what their tokens got.
    ///   - excusedRejections: rejections a device cannot have received, besides those still
    ///     pending on a revoked device (the verdict finds those): a restore's abandoned change sets.
    ///   - authorForms: by device, the revisions its answers brought in the author's form;
    ///     each must be the device's own. Nil: not recorded.
    public func checks(
        devices: [any VerdictDevice], acknowledged: Set<ChangeSetRef>, regressions: [RevisionRegression],
        acknowledgedContent: [AcknowledgedChangeSet]? = nil, revoked: [RevokedDevice] = [], excusedRejections: Set<ChangeSetRef> = [],
        authorForms: [String: [Int64]]? = nil
    ) async throws -> [VerdictCheck] {
        try await gather(
            devices: devices, acknowledged: acknowledged, regressions: regressions, acknowledgedContent: acknowledgedContent,
            revoked: revoked, excusedRejections: excusedRejections, authorForms: authorForms
        ).checks
    }

    public func gather(
        devices: [any VerdictDevice], acknowledged: Set<ChangeSetRef>, regressions: [RevisionRegression],
        acknowledgedContent: [AcknowledgedChangeSet]? = nil, revoked: [RevokedDevice] = [], excusedRejections: Set<ChangeSetRef> = [],
        authorForms: [String: [Int64]]? = nil
    ) async throws -> VerdictEvidence {
        let logger = self.logger
        let revokedIds = Set(revoked.map(\.device))
        return try await VerdictDatabase.withDatabase(url: databaseURL, logger: logger) { database in
            let (schema, postgres, audit, contentRead, revocations, authors) = try await database.inSnapshot { connection in
                let schema = try await VerdictDatabase.schema(on: connection, logger: logger)
                let digests = try await VerdictDatabase.digests(of: schema, on: connection, logger: logger)
                let audit = try await VerdictDatabase.audit(on: connection, logger: logger)
                let content = try await VerdictDatabase.contentAudit(
                    of: acknowledgedContent ?? [], horizon: audit.horizon, schema: schema, on: connection, logger: logger)
                let revocations = try await VerdictDatabase.revocations(on: connection, logger: logger)
                let authors = try await VerdictDatabase.authors(
                    at: Array(Set((authorForms ?? [:]).values.joined())), on: connection, logger: logger)
                return (schema, digests, audit, content, revocations, authors)
            }
            var content = contentRead
            if let acknowledgedContent { content.checkSent(acknowledged: acknowledged, sent: acknowledgedContent) }
            if let authorForms { content.checkAuthorForms(received: authorForms, authors: authors) }
            var mismatches: [DigestMismatch] = []
            var firstMismatch: (device: any VerdictDevice, entity: Entity)?
            var lagging: [DeviceLag] = []
            var delivered: Set<ChangeSetRef> = []
            var excused = excusedRejections
            var deviceIds: Set<String> = []
            var compared = 0
            for device in devices {
                let status = try await device.verdictStatus()
                let id = status.deviceId.lowercased()
                deviceIds.insert(id)
                for seq in try await device.deliveredRejectionSeqs() { delivered.insert(ChangeSetRef(device: id, seq: seq)) }
                if revokedIds.contains(id) {
                    // Its pending change sets' answers were refused with the rest of its requests.
                    for seq in try await device.pendingSeqs() { excused.insert(ChangeSetRef(device: id, seq: seq)) }
                    continue
                }
                compared += 1
                let found = try await Self.compare(device, id: id, schema: schema, postgres: postgres)
                if firstMismatch == nil, let mismatch = found.first(where: { $0.error == nil }), let entity = schema.entity(named: mismatch.entity) {
                    firstMismatch = (device, entity)
                }
                mismatches += found
                if let lag = DeviceLag.of(
                    device: id, pendingChangeSets: status.pendingChangeSets, maxRevision: status.maxRevision, head: audit.head)
                {
                    lagging.append(lag)
                }
            }
            var firstDifference: String?
            if let (device, entity) = firstMismatch {
                // Read again after the snapshot: a quiet run has not changed since.
                firstDifference = RecordDifference.first(
                    entity: entity.name, attributes: entity.attributes,
                    left: try await device.records(of: entity.name), named: "device",
                    right: try await database.records(of: entity), named: "PostgreSQL")
            }
            return VerdictEvidence(
                comparison: DeviceComparison(
                    devices: compared, postgres: postgres, mismatches: mismatches, firstDifference: firstDifference,
                    notCompared: devices.count - compared),
                audit: audit, acknowledged: acknowledged, regressions: regressions,
                rejections: audit.rejections.filter { deviceIds.contains($0.changeSet.device) },
                delivered: delivered, lagging: lagging, content: content, revocations: revocations, revoked: revoked,
                excusedRejections: excused)
        }
    }

    /// One device's mismatches, entity by entity; an entity it cannot read is a mismatch too.
    static func compare(
        _ device: any VerdictDevice, id: String, schema: DatasetSchema, postgres: [EntityDigest]
    ) async throws -> [DigestMismatch] {
        var digests: [String: EntityDigest] = [:]
        var errors: [String: String] = [:]
        for entity in schema.entities {
            do {
                let records = try await device.records(of: entity.name)
                digests[entity.name] = EntityDigest(entity: entity.name, attributes: entity.attributes, records: records)
            } catch is CancellationError {
                throw CancellationError()
            } catch {
                errors[entity.name] = "\(error)"
            }
        }
        return DigestMismatch.between(device: id, digests: digests, postgres: postgres).map { mismatch in
            var mismatch = mismatch
            mismatch.error = errors[mismatch.entity]
            return mismatch
        }
    }
}

/// What the verdict gathered, and the checks built from it.
public struct VerdictEvidence: Sendable {
    public var comparison: DeviceComparison
    public var audit: LogAudit
    public var acknowledged: Set<ChangeSetRef>
    public var regressions: [RevisionRegression]
    /// The server's rejections of the run's devices (others, such as a seeding device, are not checked).
    public var rejections: [ServerRejection]
    /// The (device, seq) pairs of the conflicts the devices hold.
    public var delivered: Set<ChangeSetRef>
    /// Devices compared with PostgreSQL that had not converged.
    public var lagging: [DeviceLag]
    public var content: ContentAudit
    /// nil when PostgreSQL has no `revoked_at` (a server from before revocation).
    public var revocations: RevocationAudit?
    public var revoked: [RevokedDevice]
    /// Rejections the devices cannot have received (see `VerdictChecks.rejectionsDelivered`).
    public var excusedRejections: Set<ChangeSetRef>

    public var checks: [VerdictCheck] {
        [
            VerdictChecks.devicesEqual(comparison),
            VerdictChecks.lostChangeSets(acknowledged: acknowledged, committed: audit.committed),
            VerdictChecks.acknowledgedContent(content),
            VerdictChecks.duplicateRecords(audit.duplicates, repeated: audit.repeated),
            VerdictChecks.gapFreeLog(audit.gaps),
            VerdictChecks.revisionRegressions(regressions),
            VerdictChecks.rejectionsDelivered(rejections, delivered: delivered, excused: excusedRejections),
            VerdictChecks.revokedTokens(revocations, devices: revoked),
            VerdictChecks.liveness(lagging, devices: comparison.devices, head: audit.head),
        ]
    }
}
