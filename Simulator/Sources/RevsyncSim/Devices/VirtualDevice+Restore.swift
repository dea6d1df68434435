import Foundation
import RevsyncDevice

/// The `device_restore` fault: the device's file is copied, the device goes on
/// working (so the server moves past the copy: more seqs and temporary ids used),
/// then the copy is put back and a new engine opens it with the same token, as
/// when a phone is restored from an older backup.
extension VirtualDevice {
    /// The copy a restore puts back, and what it held.
    struct RestorePoint: Sendable {
        var file: DeviceFileCopy
        var maxRevision: Int64
        var pendingSeqs: Set<Int64>
        /// How many acknowledgements the device had seen when the copy was taken.
        var acknowledgedBefore: Int
        var takenAt: ContinuousClock.Instant
    }

    /// What a restore did, for the run's timeline.
    struct RestoreSummary: Sendable {
        var copyAge: Duration
        /// The device's revision before the restore and the copy's.
        var revisionBefore: Int64
        var revisionAfter: Int64
        /// Change sets acknowledged between the copy and the restore (the server moved past the copy).
        var acknowledgedSinceCopy: Int
        /// Change sets pending at the restore that the copy does not hold: gone with the restore.
        var abandoned: Int
    }

    /// Copies the file with the engine closed (a consistent copy of a WAL database),
    /// then opens it again and resumes.
    func takeCopy() async throws {
        try await replacingEngine {
            try await self.engine.close()
            let file = try DeviceFileCopy.take(of: self.plan.databasePath, to: self.plan.databasePath + ".copy")
            self.engine = try self.openEngine()
            let status = try await self.engine.status()
            let pending = Set(try await self.engine.pendingChangeSets().compactMap(\.seq))
            self.restorePoint = RestorePoint(
                file: file, maxRevision: status.maxRevision, pendingSeqs: pending, acknowledgedBefore: self.acknowledgedSeqs.count,
                takenAt: .now)
        }
    }

    /// Puts the copy back and starts a new engine on it.
    ///
    /// First waits, up to `settle`, for the device to have nothing pending, so that
    /// what it sent since the copy was answered (and its rejections delivered) before
    /// the restore throws that away; what is still pending then is abandoned, and its
    /// rejections are excused in the verdict. Conflicts the replaced file held were
    /// delivered and are excused too. The device's revision goes back to the copy's
    /// on purpose: regressions are watched from the restored revision on.
    func restoreCopy(settle: Duration) async throws -> RestoreSummary {
        guard let point = restorePoint else { throw SoakError("\(plan.name): restore without a copy") }
        let deadline = ContinuousClock.now + settle
        while ContinuousClock.now < deadline {
            await observeStatus()
            if pending == 0 { break }
            try await Task.sleep(for: .milliseconds(500))
        }
        return try await replacingEngine {
            let status = try await self.engine.status()
            let conflicts = Set(try await self.engine.storedConflicts().compactMap(\.seq))
            let pending = Set(try await self.engine.pendingChangeSets().compactMap(\.seq))
            try await self.engine.close()
            try point.file.restore(over: self.plan.databasePath)
            self.engine = try self.openEngine()
            let restored = try await self.engine.status()
            self.maxRevision = restored.maxRevision
            self.pending = restored.pendingChangeSets
            let abandoned = pending.subtracting(point.pendingSeqs)
            self.excusedRejectionSeqs.formUnion(conflicts.union(abandoned))
            self.restorePoint = nil
            return RestoreSummary(
                copyAge: .now - point.takenAt, revisionBefore: status.maxRevision, revisionAfter: restored.maxRevision,
                acknowledgedSinceCopy: self.acknowledgedSeqs.count - point.acknowledgedBefore, abandoned: abandoned.count)
        }
    }
}
