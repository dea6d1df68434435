import RevsyncLink

/// A fault the soak injects besides the links' own, by the name the report uses.
public enum FaultKind: String, Sendable, CaseIterable, Codable {
    case serverKill = "server_kill"
    case redisFlush = "redis_flush"
    case redisRestart = "redis_restart"
    case postgresRestart = "postgres_restart"
    case postgresRefuses = "postgres_refuses"
    case snapshotRemoved = "snapshot_removed"
    case schemaUpgrade = "schema_upgrade"
    case databaseRestore = "database_restore"
    case redisPartition = "redis_partition"
    case postgresPathDies = "postgres_path_dies"
    case postgresFreezes = "postgres_freezes"
    case deviceCrash = "device_crash"
    case deviceJoin = "device_join"
    case deviceRestore = "device_restore"
    case deviceRevoke = "device_revoke"
    case deviceRoleDowngrade = "device_role_downgrade"
    case deviceRotate = "device_rotate"

    /// The faults that hit the server side (switched on by `--faults`).
    public static let serverSide: [FaultKind] = [
        .serverKill, .redisFlush, .redisRestart, .postgresRestart, .postgresRefuses, .snapshotRemoved, .schemaUpgrade, .databaseRestore,
        .redisPartition, .postgresPathDies, .postgresFreezes,
    ]
    /// The faults that hit one device's standing with the server (switched on by `--faults`).
    public static let deviceSide: [FaultKind] = [.deviceRestore, .deviceRevoke, .deviceRoleDowngrade, .deviceRotate]
    /// Everything `--faults` can name (and `all` switches on).
    public static let switchable: [FaultKind] = serverSide + deviceSide

    /// The `--faults` spelling: `server-kill`, `device-restore`, …
    public var optionName: String { rawValue.replacingOccurrences(of: "_", with: "-") }
}

/// One planned fault: when (from the workload's start), what, and on which instance or device.
struct ScheduledFault: Sendable, Equatable {
    var at: Duration
    var kind: FaultKind
    /// The server instance killed, cut from Redis or whose PostgreSQL connections die, or the device crashed, joining, restored,
    /// revoked or downgraded (its index).
    var target: Int
    /// How long a killed server stays down before it is started again; how long a
    /// restored device keeps working between the copy of its file and the restore; how long
    /// PostgreSQL refuses the servers more connections; how long a device whose token was
    /// rotated keeps using the old one before its app is given the new one; how long an
    /// instance is cut from Redis.
    var duration: Duration
    /// How a partition from Redis looks to the instance; nil for other faults.
    var cut: TCPRelay.Cut? = nil
}

/// The run's fault timeline, drawn from the seed before the run starts, so the
/// same seed injects the same faults at the same moments.
///
/// Each enabled server-side fault happens once in a short run and then again at
/// its own period in long ones (kill every 5 minutes, Redis flush every 7,
/// Redis restart every 11, PostgreSQL restart every 13, PostgreSQL refusing more
/// connections for 30 s every 9, the snapshot files removed every 4), first at 35 %,
/// 50 %, 65 %, 80 %, 50 % and 25 % of the first period or of the run, whichever is shorter.
/// A rolling schema upgrade happens once, at a quarter of the run (clear of the kills and
/// refusals in runs of 10 and 30 minutes: it restarts every instance). A database restore happens
/// once: the backup at 70 % of the run, put back `restoreAfter` later (in runs under 5 minutes at
/// 85 %, put back after 8 % of the run, so that it follows the device-side faults). Runs of 5
/// minutes or more put the same backup back a second time, at 85 % (target 1): its history id,
/// older than the one the first restore was renewed to, must be renewed again, not adopted. No
/// device joins (a join is moved before), and no device-side fault falls, from 10 s (3 % of a
/// short run) before the backup to as long after the last restore (the restore
/// would undo a registration, revocation, rotation or role change made in between, which a
/// real deployment's operator would redo by hand). The refusals fall clear of the
/// kills and restarts in runs of 10 and 30 minutes: their probes of `/ready` would
/// otherwise meet a server or PostgreSQL that is down.
/// Device crashes fall between 10 % and 90 % of the run, joins between 10 %
/// and 60 % (so joiners still work and converge).
///
/// Device-side faults work the same way, at a random point of a window of the
/// first period or of the run: a restore every 6 minutes (the copy at 20–45 %,
/// the restore 15–25 % of the window later), a revocation every 10 (at 30–60 %),
/// a role downgrade every 8 (at 25–55 %), a token rotation every 7 (at 35–65 %, the
/// device given its new token 3–8 s later). Each picks a device no other
/// device-side fault and, while there are others, no crash picked; a downgrade
/// picks a member (every tenth device is an admin).
///
/// Partitions between one instance and Redis: see `partitions`.
enum FaultPlan {
    /// How long PostgreSQL refuses the servers more connections, each time.
    static let refusal: Duration = .seconds(30)
    /// How long after its backup the database is restored: the devices commit meanwhile.
    static let restoreAfter: Duration = .seconds(25)

    static func make(
        workload: Duration, faults enabled: Set<FaultKind>, instances: Int, devices: Int, joining: Int, crashes: Int, seed: UInt64
    ) -> [ScheduledFault] {
        var random = SplitMix64(seed: seed ^ 0xFA_17)
        let total = workload.inSeconds
        var faults: [ScheduledFault] = []
        let periodic: [(FaultKind, Double, Double)] = [
            (.serverKill, 300, 0.35), (.redisFlush, 420, 0.50), (.redisRestart, 660, 0.65), (.postgresRestart, 780, 0.80),
            (.postgresRefuses, 540, 0.50), (.snapshotRemoved, 240, 0.25), (.schemaUpgrade, .infinity, 0.25),
        ]
        for (kind, period, phase) in periodic where enabled.contains(kind) {
            var at = min(period, total) * phase
            while at < total * 0.9 {
                let target = kind == .serverKill ? Int(random.next() % UInt64(max(1, instances))) : 0
                let downtime = kind == .serverKill ? 2 + random.nextUnit() * 3 : kind == .postgresRefuses ? refusal.inSeconds : 0
                faults.append(ScheduledFault(at: .seconds(at), kind: kind, target: target, duration: .seconds(downtime)))
                at += period
            }
        }
        for _ in 0..<crashes where devices > 0 {
            let at = total * (0.1 + 0.8 * random.nextUnit())
            faults.append(ScheduledFault(at: .seconds(at), kind: .deviceCrash, target: Int(random.next() % UInt64(devices)), duration: .zero))
        }
        for joiner in 0..<joining {
            let at = total * (0.1 + 0.5 * random.nextUnit())
            faults.append(ScheduledFault(at: .seconds(at), kind: .deviceJoin, target: devices + joiner, duration: .zero))
        }
        // Planned last, so that adding them leaves the draws above (and older seeds' plans) as they were.
        let crashed = Set(faults.filter { $0.kind == .deviceCrash }.map(\.target))
        faults += deviceSide(total: total, enabled: enabled, devices: devices, crashed: crashed, random: &random)
        if enabled.contains(.databaseRestore) {
            // A short run (the CI soak's minute) restores late and quickly, after its device-side faults.
            let short = total < 300
            let span = short ? min(restoreAfter, .seconds(total * 0.08)) : restoreAfter
            let restore = ScheduledFault(at: .seconds(total * (short ? 0.85 : 0.7)), kind: .databaseRestore, target: 0, duration: span)
            let again = short ? nil : ScheduledFault(at: .seconds(total * 0.85), kind: .databaseRestore, target: 1, duration: .zero)
            let margin: Duration = .seconds(min(10, total * 0.03))
            let clear = (restore.at - margin)...((again?.at ?? restore.at + restore.duration) + margin)
            // A join is moved before the window (the joiners are counted); the others are dropped.
            for index in faults.indices where faults[index].kind == .deviceJoin && clear.contains(faults[index].at) {
                faults[index].at = max(.zero, clear.lowerBound - .seconds(5))
            }
            let undone: Set<FaultKind> = [.deviceRevoke, .deviceRotate, .deviceRoleDowngrade, .deviceRestore]
            faults.removeAll { fault in
                undone.contains(fault.kind) && fault.at <= clear.upperBound && fault.at + fault.duration >= clear.lowerBound
            }
            faults.append(restore)
            if let again { faults.append(again) }
        }
        if enabled.contains(.redisPartition) {
            let cuts = partitions(total: total, instances: instances, planned: faults, seed: seed)
            moveKills(&faults, outOf: cuts, total: total, instances: instances)
            faults += cuts
        }
        if enabled.contains(.postgresPathDies) {
            faults += silentPaths(total: total, instances: instances, planned: faults, seed: seed)
        }
        if enabled.contains(.postgresFreezes) {
            faults += freezes(total: total, instances: instances, planned: faults)
        }
        return faults.sorted { $0.at < $1.at }
    }

    /// How often PostgreSQL freezes, and where in the first period (or the run) it is first tried.
    static let freezePeriod = 600.0
    static let freezePhase = 0.50
    /// Kept clear either side of a freeze: what comes before must have settled, and what follows
    /// must not meet the servers still catching up.
    static let freezeMargin = 5.0
    /// Faults a freeze may meet: they need neither PostgreSQL nor a watch of it, or (a join)
    /// wait for it longer than it lasts.
    static let meetFreezes: Set<FaultKind> = [.deviceCrash, .deviceJoin, .snapshotRemoved, .redisFlush, .redisRestart, .postgresFreezes]

    /// Every process of PostgreSQL stopped for ``FrozenPostgres/span`` (`PostgresProcesses`),
    /// every `freezePeriod`, at a moment clear of every other fault that needs PostgreSQL or
    /// watches it: all but `meetFreezes` (a kill's restart migrates, an admin request or a
    /// restore writes, a watch reads, a PostgreSQL restart would not end), and a device's restore
    /// only at its two ends (the copy, and the restore with its settling). Tried from
    /// `freezePhase` of the period on, moved later by a second until clear, then earlier, within
    /// 10–90 % of the run; none when no moment is clear. Planned last, and draws nothing: the
    /// other faults of a seed stay as they were.
    private static func freezes(total: Double, instances: Int, planned: [ScheduledFault]) -> [ScheduledFault] {
        let span = FrozenPostgres.span.inSeconds, margin = freezeMargin
        let busy: [ClosedRange<Double>] = planned.flatMap { fault -> [ClosedRange<Double>] in
            let at = fault.at.inSeconds, duration = fault.duration.inSeconds
            switch fault.kind {
            case _ where meetFreezes.contains(fault.kind): return []
            case .schemaUpgrade: return [at...(at + Double(max(1, instances)) * (SchemaUpgrade.pause.inSeconds + 10))]
            case .postgresPathDies: return [at...(at + SilentPathRecovery.bound.inSeconds)]
            // Its watch for a new subscription after the heal reads the instance's metrics, not PostgreSQL.
            case .redisPartition: return [at...(at + duration + 5)]
            // The device works offline from its copy to its restore; the restore then waits up to
            // 20 s for it to settle with the server.
            case .deviceRestore: return [at...(at + 10), (at + duration)...(at + duration + 30)]
            default: return [at...(at + duration + 10)]
            }
        }
        var faults: [ScheduledFault] = []
        func clear(_ start: Double) -> Bool {
            let frozen = (start - margin)...(start + span + margin)
            return start >= total * 0.1 && start + span < total * 0.9 && !busy.contains { $0.overlaps(frozen) }
                && !faults.contains { $0.at.inSeconds - span - margin...($0.at.inSeconds + span + margin) ~= start }
        }
        var at = min(freezePeriod, total) * freezePhase
        while at + span < total * 0.9 {
            let later = stride(from: at, to: total * 0.9 - span, by: 1).first(where: clear)
            let earlier = stride(from: at, through: total * 0.1, by: -1).first(where: clear)
            if let start = later ?? earlier {
                faults.append(ScheduledFault(at: .seconds(start), kind: .postgresFreezes, target: 0, duration: FrozenPostgres.span))
            }
            at += freezePeriod
        }
        return faults
    }

    /// How often an instance's connections to PostgreSQL die without a word, and where in the
    /// first period (or the run).
    static let silentPathPeriod = 420.0
    static let silentPathPhase = 0.55

    /// One instance at a time loses its open connections to PostgreSQL for good, silently
    /// (`SilentFlows`: their packets dropped both ways; new connections pass), every
    /// `silentPathPeriod`. Its moment and instance are chosen clear of what would hide the
    /// outcome while the soak watches (``SilentPathRecovery/bound``): a kill of that instance
    /// or a schema upgrade's restarts (a new process has new connections), a PostgreSQL
    /// restart (it ends PostgreSQL's end of them). Moved on by 20 s, up to the run's 90 %,
    /// until clear. From a generator of its own, so that switching it on leaves the other
    /// faults of a seed as they were.
    private static func silentPaths(total: Double, instances: Int, planned: [ScheduledFault], seed: UInt64) -> [ScheduledFault] {
        var random = SplitMix64(seed: seed ^ 0x51_1E47)
        let count = max(1, instances)
        // The windows that would hide it, by instance (nil: every instance).
        let hiding: [(instance: Int?, window: ClosedRange<Double>)] = planned.compactMap { fault in
            let at = fault.at.inSeconds
            switch fault.kind {
            case .serverKill: return (fault.target % count, (at - 5)...(at + fault.duration.inSeconds + 5))
            case .schemaUpgrade: return (nil, (at - 5)...(at + Double(count) * (SchemaUpgrade.pause.inSeconds + 10)))
            case .postgresRestart: return (nil, (at - 10)...(at + 20))
            default: return nil
            }
        }
        let watch = SilentPathRecovery.bound.inSeconds + 5
        var faults: [ScheduledFault] = []
        var at = min(silentPathPeriod, total) * silentPathPhase
        while at < total * 0.9 {
            let first = Int(random.next() % UInt64(count))
            var start = at
            var chosen: Int?
            while chosen == nil, start < total * 0.9 {
                chosen = (0..<count).map { (first + $0) % count }.first { target in
                    !hiding.contains { ($0.instance == nil || $0.instance == target) && $0.window.overlaps(start...(start + watch)) }
                }
                if chosen == nil { start += 20 }
            }
            if let chosen {
                faults.append(ScheduledFault(at: .seconds(start), kind: .postgresPathDies, target: chosen, duration: .zero))
            }
            at += silentPathPeriod
        }
        return faults
    }

    /// Moves each kill of an instance planned from 5 s before it is cut from Redis until the
    /// soak stopped looking for its new subscription (``PartitionRecovery/bound`` after the heal)
    /// to the nearest moment clear of every such window of that instance within the run's faults
    /// (left where it was if there is none): a process started then subscribes to Redis afresh
    /// and would hide whether the cut one noticed its subscription had died ("subscribed again
    /// after a cut from Redis").
    private static func moveKills(_ faults: inout [ScheduledFault], outOf cuts: [ScheduledFault], total: Double, instances: Int) {
        for index in faults.indices where faults[index].kind == .serverKill {
            let kill = faults[index]
            // Each window of this instance, and how long the kill lasts.
            let windows = cuts.filter { $0.target == kill.target % max(1, instances) }.map { cut in
                (cut.at - .seconds(5))...(cut.at + cut.duration + PartitionRecovery.bound)
            }
            func clear(_ at: Duration) -> Bool {
                at >= .zero && at.inSeconds < total * 0.9 && !windows.contains { at <= $0.upperBound && at + kill.duration >= $0.lowerBound }
            }
            guard !clear(kill.at) else { continue }
            // A second clear of a window's edge either side.
            let candidates = windows.flatMap { [$0.upperBound + .seconds(1), $0.lowerBound - kill.duration - .seconds(1)] }
            if let nearest = candidates.filter(clear).min(by: { abs(($0 - kill.at).inSeconds) < abs(($1 - kill.at).inSeconds) }) {
                faults[index].at = nearest
            }
        }
    }

    /// How often an instance is cut from Redis, and where in the first period (or the run).
    static let partitionPeriod = 360.0
    static let partitionPhase = 0.40
    /// The periodic cuts' kinds, in turn.
    static let partitionCuts: [TCPRelay.Cut] = [.drop, .reset, .silent]

    /// One instance at a time cut from Redis while the others keep it (`TCPRelay` between each
    /// instance and Redis), 15–25 s each (at most a tenth of a short run), every
    /// `partitionPeriod`, dropped, reset and silent in turn (`partitionCuts`). When a revocation is planned, one more
    /// partition, silent, cuts the revoked device's own instance from 3–6 s before the
    /// revocation until at least 5 s after it: the instance cannot hear the revocation
    /// announced, and must still refuse the token within the contract's second. A periodic one
    /// that would overlap it is left out. None overlaps a Redis restart, which closes every
    /// connection and would make a silent cut a loud one, and a periodic one that would meet a
    /// schema upgrade's restarts is moved past them. From a generator of its own, so that
    /// switching it on leaves the other faults of a seed as they were, but for a kill of a cut
    /// instance, moved out of its cut (`moveKills`).
    private static func partitions(total: Double, instances: Int, planned: [ScheduledFault], seed: UInt64) -> [ScheduledFault] {
        var random = SplitMix64(seed: seed ^ 0x9A27_1710)
        func span() -> Double { min(15 + 10 * random.nextUnit(), max(2, total * 0.1)) }
        let restarts = planned.filter { $0.kind == .redisRestart }.map(\.at.inSeconds)
        func overlaps(_ at: Double, _ duration: Double, _ others: [ScheduledFault]) -> Bool {
            // With 10 s on either side of a restart: Redis takes a moment to stop and to answer again.
            restarts.contains { $0 >= at - 10 && $0 <= at + duration + 10 }
                || others.contains { at < $0.at.inSeconds + $0.duration.inSeconds && $0.at.inSeconds < at + duration }
        }
        var faults: [ScheduledFault] = []
        if let revocation = planned.filter({ $0.kind == .deviceRevoke }).min(by: { $0.at < $1.at }) {
            let lead = 3 + 3 * random.nextUnit()
            let at = max(0, revocation.at.inSeconds - lead)
            let duration = max(span(), revocation.at.inSeconds - at + 5)
            if !overlaps(at, duration, []) {
                faults.append(ScheduledFault(
                    at: .seconds(at), kind: .redisPartition, target: revocation.target % max(1, instances),
                    duration: .seconds(duration), cut: .silent))
            }
        }
        // A rolling schema upgrade restarts every instance: a cut then, or while the soak looks
        // for its new subscription after the heal, could not be judged. A periodic cut is moved past it.
        let upgrades = planned.filter { $0.kind == .schemaUpgrade }.map { upgrade in
            (upgrade.at.inSeconds - 5)...(upgrade.at.inSeconds + Double(max(1, instances)) * (SchemaUpgrade.pause.inSeconds + 10))
        }
        var at = min(partitionPeriod, total) * partitionPhase
        var turn = 0
        while at < total * 0.9 {
            let duration = span()
            let target = Int(random.next() % UInt64(max(1, instances)))
            var start = at
            for upgrade in upgrades where start <= upgrade.upperBound && start + duration + PartitionRecovery.bound.inSeconds >= upgrade.lowerBound {
                start = upgrade.upperBound + 1
            }
            if start < total * 0.9, !overlaps(start, duration, faults) {
                faults.append(ScheduledFault(
                    at: .seconds(start), kind: .redisPartition, target: target, duration: .seconds(duration),
                    cut: partitionCuts[turn % partitionCuts.count]))
                turn += 1
            }
            at += partitionPeriod
        }
        return faults
    }

    private static func deviceSide(
        total: Double, enabled: Set<FaultKind>, devices: Int, crashed: Set<Int>, random: inout SplitMix64
    ) -> [ScheduledFault] {
        guard devices > 0 else { return [] }
        // (kind, period, window start, window width): all as fractions of the first period or the run.
        let periodic: [(FaultKind, Double, Double, Double)] = [
            (.deviceRestore, 360, 0.20, 0.25), (.deviceRevoke, 600, 0.30, 0.30), (.deviceRoleDowngrade, 480, 0.25, 0.30),
            (.deviceRotate, 420, 0.35, 0.30),
        ]
        var taken: Set<Int> = []
        var faults: [ScheduledFault] = []
        for (kind, period, start, width) in periodic where enabled.contains(kind) {
            let window = min(period, total)
            var at = window * (start + width * random.nextUnit())
            while at < total * 0.9 {
                let candidates = (0..<devices).filter { kind != .deviceRoleDowngrade || DeviceRole.of($0) == DeviceRole.member }
                let free = candidates.filter { !taken.contains($0) }
                let preferred = free.filter { !crashed.contains($0) }
                // A rotation never shares its device: a restore would put the old token back, a revocation refuses it.
                let pool = !preferred.isEmpty ? preferred : !free.isEmpty ? free : kind == .deviceRotate ? [] : candidates
                guard !pool.isEmpty else { break }
                let target = pool[Int(random.next() % UInt64(pool.count))]
                taken.insert(target)
                let span =
                    kind == .deviceRestore ? window * (0.15 + 0.10 * random.nextUnit()) : kind == .deviceRotate ? 3 + 5 * random.nextUnit() : 0
                faults.append(ScheduledFault(at: .seconds(at), kind: kind, target: target, duration: .seconds(span)))
                at += period
            }
        }
        return faults
    }
}
