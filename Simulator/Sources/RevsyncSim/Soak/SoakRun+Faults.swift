import Foundation
import RevsyncDevice
import RevsyncLink

extension SoakRun {
    /// Injects each planned fault at its moment until cancelled (the workload's end).
    /// A fault that has begun runs to its end even then: a killed server is started again.
    func inject(_ faults: [ScheduledFault], fleet: ServerFleet, direct: [HTTPSyncTransport], adminToken: String, profile: LinkProfile) async {
        guard let start = workloadStart else { return }
        await withTaskGroup(of: Void.self) { group in
            for fault in faults {
                group.addTask {
                    do {
                        try await Task.sleep(until: start + fault.at, clock: .continuous)
                    } catch {
                        return
                    }
                    // Not a child: cancellation must not cut a restart short.
                    await Task {
                        await self.perform(fault, fleet: fleet, direct: direct, adminToken: adminToken, profile: profile)
                    }.value
                }
            }
        }
    }

    private func perform(_ fault: ScheduledFault, fleet: ServerFleet, direct: [HTTPSyncTransport], adminToken: String, profile: LinkProfile) async {
        let stack = stackControl()
        do {
            switch fault.kind {
            case .serverKill:
                let index = fault.target % fleet.count
                note(fault.kind.rawValue, "instance \(index) (port \(fleet.configuration.ports[index])) killed with SIGKILL, "
                    + "down for \(format(fault.duration))")
                try await fleet.kill(index)
                let left = SnapshotDirectoryAudit.abandonedWorkDirectories(in: snapshotDirectory)
                workDirectoriesLeftByKills.formUnion(left)
                if !left.isEmpty { note("work_left", "\(left.count) work directories of the snapshot directory left unlocked; the others' sweep must remove them") }
                try? await Task.sleep(for: fault.duration)
                try await fleet.restart(index)
                note("server_restart", "instance \(index) ready again")
            case .redisFlush:
                try await stack.flushRedis()
                note(fault.kind.rawValue, "FLUSHALL: every cached revision and the cached head are gone")
            case .redisRestart:
                note(fault.kind.rawValue, "Redis restarting (shutdown nosave)")
                try await stack.restartRedis()
                note("redis_up", "Redis answers again")
            case .postgresRestart:
                note(fault.kind.rawValue, "PostgreSQL restarting (fast shutdown)")
                try await stack.restartPostgres()
                note("postgres_up", "PostgreSQL answers again")
            case .redisPartition:
                try await partition(fault, fleet: fleet)
            case .postgresPathDies:
                try await silencePostgresPath(of: fault.target % fleet.count, fleet: fleet)
            case .postgresFreezes:
                try await freezePostgres(fleet: fleet)
            case .postgresRefuses:
                try await refuseConnections(fleet: fleet, for: fault.duration)
            case .schemaUpgrade:
                let (path, version) = try SchemaUpgrade.write(from: settings.schemaPath, into: settings.runDirectory)
                note(fault.kind.rawValue, "the database is migrated to schema version \(version) (\(SchemaUpgrade.entity).\(SchemaUpgrade.attribute) "
                    + "added), then the instances restart with it one at a time, \(format(SchemaUpgrade.pause)) apart")
                try await fleet.upgradeSchema(to: path, pause: SchemaUpgrade.pause) { index in
                    await self.note("server_upgraded", "instance \(index) serves schema version \(version)")
                }
            case .databaseRestore where fault.target == 0:
                try await restoreDatabase(fleet: fleet, after: fault.duration)
            case .databaseRestore:
                try await restoreDatabaseAgain(fleet: fleet)
            case .snapshotRemoved:
                let removed = SnapshotDirectoryAudit.removePublished(in: snapshotDirectory)
                note(fault.kind.rawValue, removed > 0
                    ? "\(removed) published snapshot files removed, as a cleaner of the temporary directory would; the next GET /snapshot "
                        + "must find or build another, not answer 404"
                    : "no published snapshot file to remove (none built since the last removal)")
            case .deviceCrash:
                guard fault.target < devices.count else { return }
                let device = devices[fault.target]
                note(fault.kind.rawValue, "\(device.plan.name) killed mid-sync, restarted from its file")
                try await device.crash()
            case .deviceJoin:
                let device = try await makeDevice(
                    fault.target, fleet: fleet, direct: direct, adminToken: adminToken, profile: profile, throughLink: true)
                devices.append(device)
                note(fault.kind.rawValue, "\(device.plan.name) registered; bootstraps from /snapshot through its link")
                await device.start(working: true)
            case .deviceRestore:
                guard fault.target < devices.count else { return }
                try await restore(devices[fault.target], after: fault.duration)
            case .deviceRevoke:
                guard fault.target < devices.count else { return }
                try await revoke(fault.target, fleet: fleet, adminToken: adminToken)
            case .deviceRotate:
                guard fault.target < devices.count else { return }
                try await rotate(fault.target, fleet: fleet, adminToken: adminToken, renewedAfter: fault.duration)
            case .deviceRoleDowngrade:
                guard fault.target < devices.count else { return }
                let device = devices[fault.target]
                let info = try await admin(for: fault.target, fleet: fleet, adminToken: adminToken)
                    .setRole(device.deviceId, to: DeviceRole.viewer)
                guard info.role == DeviceRole.viewer else {
                    throw SoakError("PATCH /devices/\(device.deviceId) answered role \(info.role), not \(DeviceRole.viewer)")
                }
                note(fault.kind.rawValue, "\(device.plan.name) downgraded from \(device.plan.role) to viewer; it keeps editing "
                    + "as a \(device.plan.role), the server refuses (forbidden) and its corrective sets must repair it")
            }
        } catch {
            injectionFailures.append("\(fault.kind.rawValue) at \(format(fault.at)): \(error)")
            note("error", "\(fault.kind.rawValue) failed: \(error)")
        }
    }

    /// Cuts one instance's relay to Redis for the fault's span, then heals it; the other
    /// instances keep Redis throughout.
    private func partition(_ fault: ScheduledFault, fleet: ServerFleet) async throws {
        let index = fault.target % fleet.count
        guard index < redisRelays.count else {
            note(FaultKind.redisPartition.rawValue, "no relay in front of Redis for instance \(index); nothing cut")
            return
        }
        let relay = redisRelays[index], cut = fault.cut ?? .silent
        let how = switch cut {
        case .silent: "silently: nothing passes and nothing is closed, so only its own timeouts can tell"
        case .reset: "by reset: its connections to Redis are closed and new ones refused"
        case .drop: "by a dropped path: its open connections to Redis pass nothing, then or ever, and nothing is closed"
        }
        note(FaultKind.redisPartition.rawValue, "instance \(index) (port \(fleet.configuration.ports[index])) cut from Redis \(how), "
            + "for \(format(fault.duration)); the others keep Redis")
        let cutAt = Date(), process = await fleet.processIdentifier(index)
        await relay.cut(cut)
        stats.setCutInstance(index)
        try? await Task.sleep(for: fault.duration)
        relay.heal()
        stats.setCutInstance(nil)
        note("redis_healed", "instance \(index) reaches Redis again")
        let recovery = await recovery(of: index, cut: cut, since: cutAt, process: process, fleet: fleet)
        // The workload ended while it looked: the heal came with the run's end, and nothing is known.
        guard !Task.isCancelled else { return }
        partitionRecoveries.append(recovery)
        if recovery.restarted {
            note("redis_not_judged", "instance \(index) was restarted after its cut began: its new process subscribed afresh")
        } else if let after = recovery.secondsAfterHeal {
            note("redis_resubscribed", "instance \(index) subscribed to Redis anew \(String(format: "%.1f", after)) s after the heal")
        } else {
            note("redis_not_resubscribed", "instance \(index) had no Redis subscription made after the cut "
                + "\(format(PartitionRecovery.bound)) after the heal")
        }
    }

    /// How instance `index` came back from its cut, watched from now (the heal): the seconds until
    /// it reports a Redis subscription started after `cutAt` (a subscription it kept from before
    /// may be dead without knowing it), none within ``PartitionRecovery/bound``, or `restarted`
    /// when its process is no longer `process` (killed or restarted since the cut began).
    private func recovery(
        of index: Int, cut: TCPRelay.Cut, since cutAt: Date, process: Int32?, fleet: ServerFleet
    ) async -> PartitionRecovery {
        var recovery = PartitionRecovery(instance: index, cut: cut, secondsAfterHeal: nil)
        guard let metrics = fleet.metrics else { return recovery }
        let healed = ContinuousClock.now
        while ContinuousClock.now - healed < PartitionRecovery.bound, !Task.isCancelled {
            if await fleet.processIdentifier(index) != process {
                recovery.restarted = true
                return recovery
            }
            if let since = await metrics.currentValue(of: PartitionRecovery.metric, instance: index), since >= cutAt.timeIntervalSince1970 {
                // Read again: a process that started and subscribed between the two reads is not the cut one.
                if await fleet.processIdentifier(index) != process {
                    recovery.restarted = true
                } else {
                    recovery.secondsAfterHeal = (ContinuousClock.now - healed).inSeconds
                }
                return recovery
            }
            try? await Task.sleep(for: .milliseconds(250))
        }
        return recovery
    }

    /// Copies the device's file, makes it work on so that the server moves past the
    /// copy, then puts the copy back under a new engine with the same token.
    private func restore(_ device: VirtualDevice, after span: Duration) async throws {
        try await device.takeCopy()
        note(FaultKind.deviceRestore.rawValue, "\(device.plan.name): copy of its file taken (engine closed); "
            + "it works on for \(format(span)), then restarts from the copy")
        // New seqs and temporary ids at once, so the server moves past the copy even for a slow user.
        for action in [WorkloadAction.createScreenTree, .createTraining, .updateOwn] { await device.act(action) }
        try? await Task.sleep(for: span)
        let summary = try await device.restoreCopy(settle: .seconds(20))
        note("device_restored", "\(device.plan.name) restarted from its copy of \(format(summary.copyAge)) ago: revision "
            + "\(summary.revisionBefore) → \(summary.revisionAfter), \(summary.acknowledgedSinceCopy) change sets acknowledged "
            + "since the copy, \(summary.abandoned) pending ones abandoned")
    }

    /// Backs the database up, lets the devices commit on for `span`, then restores the backup
    /// under the running servers: they must renew its history id, and every device that holds
    /// revisions the restore took away must load a new snapshot rather than catch up past them.
    private func restoreDatabase(fleet: ServerFleet, after span: Duration) async throws {
        let url = fleet.configuration.databaseURL
        let log = settings.runDirectory + "/stack.log"
        let backup = try await DatabaseBackup.take(of: url, to: settings.runDirectory + "/backup.dump", logPath: log)
        note(FaultKind.databaseRestore.rawValue, "backup taken (pg_dump) at revision \(backup.head); the devices commit on for "
            + "\(format(span)), then it is restored under the running servers")
        try? await Task.sleep(for: span)
        try await backup.restore(into: url, logPath: log)
        databaseBackup = backup
        restorePoint = RestorePoint(head: backup.head, history: backup.history)
        note("database_restored", "the database restored (pg_restore) to revision \(backup.head) (head was \(head)): what was "
            + "committed since is gone; the instances must renew its history id and the devices load it again")
    }

    /// Puts the same backup back once more, as an operator restoring an older backup than the
    /// last restore's: the database's history id goes back to the backup's, set before the one
    /// the instances renewed it to, and they must renew it again, not take it for a renewal
    /// made elsewhere. What the line since the first restore committed is gone too.
    private func restoreDatabaseAgain(fleet: ServerFleet) async throws {
        guard let backup = databaseBackup, var point = restorePoint else {
            note(FaultKind.databaseRestore.rawValue, "no backup to put back again (the first restore did not happen)")
            return
        }
        let url = fleet.configuration.databaseURL
        let logger = self.logger
        let renewed = try await SoakDatabase.withClient(url: url, logger: logger) { await SoakDatabase.history($0, logger: logger) }
        note(FaultKind.databaseRestore.rawValue, "the same backup (revision \(backup.head)) is put back again under the running servers")
        try await backup.restore(into: url, logPath: settings.runDirectory + "/stack.log")
        if let renewed { point.histories.insert(renewed) }
        point.restores += 1
        restorePoint = point
        note("database_restored", "the same backup restored again (pg_restore) to revision \(backup.head) (head was \(head)): its "
            + "history id \(backup.history) is older than the one it was renewed to (\(renewed ?? "unread")); the instances must renew "
            + "it again, and what the line since the first restore committed is gone")
    }

    /// Revokes the device on another instance than its own (when there are several),
    /// so that the revocation must travel; records when the server acknowledged it.
    private func revoke(_ index: Int, fleet: ServerFleet, adminToken: String) async throws {
        let device = devices[index]
        try await admin(for: index, fleet: fleet, adminToken: adminToken).revoke(device.deviceId)
        device.revocation.revoked(at: .now)
        visibility.setAbsent(.revoked, true, device: device.plan.index)
        revokedDevices.insert(index)
        note(FaultKind.deviceRevoke.rawValue, "\(device.plan.name) revoked on instance \((index + 1) % fleet.count); "
            + "it keeps working, every request of its token must get 401 and nothing it sends may be committed")
    }

    /// Rotates the device's token on another instance than its own (when there are several), so
    /// that the old token's refusal must travel; the device keeps the old token for `span`, as
    /// until its user signs in again, then is given the new one and must converge.
    private func rotate(_ index: Int, fleet: ServerFleet, adminToken: String, renewedAfter span: Duration) async throws {
        let device = devices[index]
        let renewed = try await admin(for: index, fleet: fleet, adminToken: adminToken).rotate(device.deviceId)
        device.revocation.revoked(at: .now)
        rotatedDevices.insert(index)
        visibility.setAbsent(.revoked, true, device: device.plan.index)
        note(FaultKind.deviceRotate.rawValue, "\(device.plan.name)'s token rotated on instance \((index + 1) % fleet.count); it keeps "
            + "the old one for \(format(span)), whose requests must get 401, then is given the new one")
        try? await Task.sleep(for: span)
        device.revocation.replaced(at: .now)
        try await device.useToken(renewed.token)
        visibility.setAbsent(.revoked, false, device: device.plan.index)
        note("device_token_renewed", "\(device.plan.name) was given its new token; it must converge")
    }

    /// The admin endpoints on the instance after the device's own.
    private func admin(for index: Int, fleet: ServerFleet, adminToken: String) -> DeviceAdmin {
        DeviceAdmin(baseURL: fleet.baseURL((index + 1) % fleet.count), adminToken: adminToken)
    }
}
