import RevsyncLink

/// A fault the soak injects besides the links' own, by the name the report uses.
public enum FaultKind: String, Sendable, CaseIterable, Codable {
    case serverKill = "server_kill"
    case redisFlush = "redis_flush"
    case redisRestart = "redis_restart"
    case postgresRestart = "postgres_restart"
    case deviceCrash = "device_crash"
    case deviceJoin = "device_join"

    /// The faults that hit the server side (switched on by flags).
    public static let serverSide: [FaultKind] = [.serverKill, .redisFlush, .redisRestart, .postgresRestart]
}

/// One planned fault: when (from the workload's start), what, and on which instance or device.
struct ScheduledFault: Sendable, Equatable {
    var at: Duration
    var kind: FaultKind
    /// The server instance killed, or the device crashed or joining (its index).
    var target: Int
    /// How long a killed server stays down before it is started again.
    var downtime: Duration
}

/// The run's fault timeline, drawn from the seed before the run starts, so the
/// same seed injects the same faults at the same moments.
///
/// Each enabled server-side fault happens once in a short run and then again at
/// its own period in long ones (kill every 5 minutes, Redis flush every 7,
/// Redis restart every 11, PostgreSQL restart every 13), first at 35 %, 50 %,
/// 65 % and 80 % of the first period or of the run, whichever is shorter.
/// Device crashes fall between 10 % and 90 % of the run, joins between 10 %
/// and 60 % (so joiners still work and converge).
enum FaultPlan {
    static func make(
        workload: Duration, serverFaults: Set<FaultKind>, instances: Int, devices: Int, joining: Int, crashes: Int, seed: UInt64
    ) -> [ScheduledFault] {
        var random = SplitMix64(seed: seed ^ 0xFA_17)
        let total = workload.inSeconds
        var faults: [ScheduledFault] = []
        let periodic: [(FaultKind, Double, Double)] = [
            (.serverKill, 300, 0.35), (.redisFlush, 420, 0.50), (.redisRestart, 660, 0.65), (.postgresRestart, 780, 0.80),
        ]
        for (kind, period, phase) in periodic where serverFaults.contains(kind) {
            var at = min(period, total) * phase
            while at < total * 0.9 {
                let target = kind == .serverKill ? Int(random.next() % UInt64(max(1, instances))) : 0
                let downtime = kind == .serverKill ? 2 + random.nextUnit() * 3 : 0
                faults.append(ScheduledFault(at: .seconds(at), kind: kind, target: target, downtime: .seconds(downtime)))
                at += period
            }
        }
        for _ in 0..<crashes where devices > 0 {
            let at = total * (0.1 + 0.8 * random.nextUnit())
            faults.append(ScheduledFault(at: .seconds(at), kind: .deviceCrash, target: Int(random.next() % UInt64(devices)), downtime: .zero))
        }
        for joiner in 0..<joining {
            let at = total * (0.1 + 0.5 * random.nextUnit())
            faults.append(ScheduledFault(at: .seconds(at), kind: .deviceJoin, target: devices + joiner, downtime: .zero))
        }
        return faults.sorted { $0.at < $1.at }
    }
}
