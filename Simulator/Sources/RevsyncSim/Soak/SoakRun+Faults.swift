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
                    + "down for \(format(fault.downtime))")
                try await fleet.kill(index)
                try? await Task.sleep(for: fault.downtime)
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
            }
        } catch {
            injectionFailures.append("\(fault.kind.rawValue) at \(format(fault.at)): \(error)")
            note("error", "\(fault.kind.rawValue) failed: \(error)")
        }
    }
}
