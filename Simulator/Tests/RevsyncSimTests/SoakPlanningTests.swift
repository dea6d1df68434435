import RevsyncLink
import RevsyncWire
import Testing
@testable import RevsyncSim

@Suite struct FaultPlanTests {
    @Test func theSameSeedPlansTheSameFaults() {
        let a = FaultPlan.make(workload: .seconds(120), faults: [.serverKill, .redisFlush], instances: 3, devices: 50, joining: 5, crashes: 10, seed: 9)
        let b = FaultPlan.make(workload: .seconds(120), faults: [.serverKill, .redisFlush], instances: 3, devices: 50, joining: 5, crashes: 10, seed: 9)
        let c = FaultPlan.make(workload: .seconds(120), faults: [.serverKill, .redisFlush], instances: 3, devices: 50, joining: 5, crashes: 10, seed: 10)
        #expect(a == b)
        #expect(a != c)
        #expect(a.map(\.at) == a.map(\.at).sorted())
    }

    @Test func aShortRunHasEachServerFaultOnceAndEveryCrashAndJoin() {
        let plan = FaultPlan.make(workload: .seconds(120), faults: [.serverKill, .redisFlush], instances: 1, devices: 50, joining: 5, crashes: 10, seed: 1)
        func count(_ kind: FaultKind) -> Int { plan.filter { $0.kind == kind }.count }
        #expect(count(.serverKill) == 1)
        #expect(count(.redisFlush) == 1)
        #expect(count(.redisRestart) == 0)
        #expect(count(.postgresRestart) == 0)
        #expect(count(.deviceCrash) == 10)
        #expect(plan.filter { $0.kind == .deviceCrash }.allSatisfy { $0.target < 50 })
        let joins = plan.filter { $0.kind == .deviceJoin }
        #expect(joins.map(\.target).sorted() == [50, 51, 52, 53, 54])
        #expect(joins.allSatisfy { $0.at >= .seconds(12) && $0.at <= .seconds(72) })
        let kill = plan.first { $0.kind == .serverKill }
        #expect(kill?.at == .seconds(42))
        #expect(kill.map { $0.duration >= .seconds(2) && $0.duration <= .seconds(5) } == true)
    }

    @Test func aLongRunRepeatsEachServerFaultAtItsPeriod() {
        let plan = FaultPlan.make(
            workload: .seconds(1800), faults: Set(FaultKind.serverSide), instances: 3, devices: 50, joining: 0, crashes: 0, seed: 2)
        func times(_ kind: FaultKind) -> [Duration] { plan.filter { $0.kind == kind }.map(\.at) }
        #expect(times(.serverKill) == [105, 405, 705, 1005, 1305, 1605].map { .seconds($0) })
        #expect(times(.redisFlush) == [210, 630, 1050, 1470].map { .seconds($0) })
        #expect(times(.redisRestart) == [429, 1089].map { .seconds($0) })
        #expect(times(.postgresRestart) == [624, 1404].map { .seconds($0) })
        #expect(times(.postgresRefuses) == [270, 810, 1350].map { .seconds($0) })
        #expect(plan.filter { $0.kind == .postgresRefuses }.allSatisfy { $0.duration == FaultPlan.refusal })
        #expect(times(.snapshotRemoved) == [60, 300, 540, 780, 1020, 1260, 1500].map { .seconds($0) })
        // Once, clear of every kill, PostgreSQL restart and refusal (it restarts every instance).
        #expect(times(.schemaUpgrade) == [.seconds(450)])
        for upgrade in plan where upgrade.kind == .schemaUpgrade {
            let window = (upgrade.at - .seconds(30))...(upgrade.at + .seconds(45))
            #expect(!plan.contains { [.serverKill, .postgresRestart, .postgresRefuses].contains($0.kind) && window.contains($0.at) })
        }
        // Clear of kills and PostgreSQL restarts, whose downtime the refusal's probes would meet.
        for refusal in plan where refusal.kind == .postgresRefuses {
            let window = (refusal.at - .seconds(20))...(refusal.at + refusal.duration + .seconds(20))
            #expect(!plan.contains { [.serverKill, .postgresRestart].contains($0.kind) && window.contains($0.at) }, "\(refusal)")
        }
        let tenMinutes = FaultPlan.make(
            workload: .seconds(600), faults: Set(FaultKind.serverSide), instances: 3, devices: 50, joining: 0, crashes: 0, seed: 2)
        let upgrade = try? #require(tenMinutes.first { $0.kind == .schemaUpgrade })
        #expect(upgrade?.at == .seconds(150))
        #expect(!tenMinutes.contains { [.serverKill, .postgresRestart, .postgresRefuses].contains($0.kind) && (120...195).contains($0.at.inSeconds) })
        #expect(plan.filter { $0.kind == .serverKill }.allSatisfy { (0..<3).contains($0.target) })
        #expect(plan.allSatisfy { !FaultKind.deviceSide.contains($0.kind) })
    }

    /// At 70 % of the run, and the same backup again at 85 % (its older id must be renewed
    /// again); no device joins and no device-side fault falls from the backup to the second
    /// restore (a restore would undo it): joins are moved before it, the others dropped.
    @Test func aDatabaseRestoreHappensTwiceClearOfDeviceLifecycles() {
        let all = Set(FaultKind.switchable)
        for seed in UInt64(1)...40 {
            let plan = FaultPlan.make(workload: .seconds(600), faults: all, instances: 3, devices: 50, joining: 5, crashes: 10, seed: seed)
            let restores = plan.filter { $0.kind == .databaseRestore }
            #expect(restores.map(\.target) == [0, 1])
            guard let restore = restores.first, let again = restores.last else { continue }
            #expect(restore.at == .seconds(420) && restore.duration == FaultPlan.restoreAfter)
            #expect(again.at == .seconds(510) && again.duration == .zero)
            let window = (restore.at - .seconds(10))...(again.at + .seconds(10))
            let lifecycles: Set<FaultKind> = [.deviceJoin, .deviceRevoke, .deviceRotate, .deviceRoleDowngrade, .deviceRestore]
            #expect(!plan.contains { lifecycles.contains($0.kind) && $0.at <= window.upperBound && $0.at + $0.duration >= window.lowerBound }, "seed \(seed)")
            #expect(plan.filter { $0.kind == .deviceJoin }.count == 5)
        }
        // A minute (the CI soak's): once, at 51 s, put back 4.8 s later, every device-side fault kept.
        for seed in UInt64(1)...40 {
            let short = FaultPlan.make(workload: .seconds(60), faults: all, instances: 1, devices: 50, joining: 5, crashes: 10, seed: seed)
            #expect(short.filter { $0.kind == .databaseRestore }.count == 1)
            let restore = short.first { $0.kind == .databaseRestore }
            #expect(restore?.at == .seconds(51) && restore?.duration == .seconds(4.8))
            #expect(Set(short.filter { FaultKind.deviceSide.contains($0.kind) }.map(\.kind)).count == 4, "seed \(seed)")
        }
        let without = FaultPlan.make(
            workload: .seconds(600), faults: all.subtracting([.databaseRestore]), instances: 3, devices: 50, joining: 5, crashes: 10, seed: 3)
        #expect(!without.contains { $0.kind == .databaseRestore })
    }

    @Test func deviceSideFaultsAreSeededAndEachHitsItsOwnDeviceOnceInAShortRun() {
        // In a short run the database restore comes after every device-side fault (below).
        let all = Set(FaultKind.switchable)
        func plan(_ seed: UInt64) -> [ScheduledFault] {
            FaultPlan.make(workload: .seconds(60), faults: all, instances: 2, devices: 50, joining: 5, crashes: 10, seed: seed)
        }
        let a = plan(4)
        #expect(a == plan(4))
        #expect(a != plan(5))
        let deviceSide = a.filter { FaultKind.deviceSide.contains($0.kind) }
        #expect(deviceSide.map(\.kind).sorted { $0.rawValue < $1.rawValue } == [.deviceRestore, .deviceRevoke, .deviceRoleDowngrade, .deviceRotate])
        #expect(Set(deviceSide.map(\.target)).count == 4, "one device each: \(deviceSide)")
        #expect(deviceSide.allSatisfy { (0..<50).contains($0.target) })
        // A device no crash hits, while there are such devices.
        let crashed = Set(a.filter { $0.kind == .deviceCrash }.map(\.target))
        #expect(deviceSide.allSatisfy { !crashed.contains($0.target) })
        for seed in UInt64(1)...40 {
            let downgrade = plan(seed).first { $0.kind == .deviceRoleDowngrade }
            #expect(downgrade.map { DeviceRole.of($0.target) } == DeviceRole.member, "seed \(seed): a downgrade picks a member")
            let restore = plan(seed).first { $0.kind == .deviceRestore }
            // The copy mid-run, and the restore early enough to keep editing afterwards.
            #expect(restore.map { $0.at >= .seconds(12) && $0.at <= .seconds(27) } == true, "seed \(seed)")
            #expect(restore.map { $0.duration >= .seconds(9) && $0.at + $0.duration <= .seconds(42) } == true, "seed \(seed)")
            let revoke = plan(seed).first { $0.kind == .deviceRevoke }
            #expect(revoke.map { $0.at >= .seconds(18) && $0.at <= .seconds(36) } == true, "seed \(seed)")
            let rotate = plan(seed).first { $0.kind == .deviceRotate }
            #expect(rotate.map { $0.at >= .seconds(21) && $0.at <= .seconds(39) } == true, "seed \(seed)")
            #expect(rotate.map { $0.duration >= .seconds(3) && $0.duration <= .seconds(8) } == true, "seed \(seed): the new token given later")
        }
    }

    @Test func switchingOnDeviceSideFaultsLeavesTheOtherFaultsOfASeedAsTheyWere() {
        let server: Set<FaultKind> = [.serverKill, .redisFlush]
        let without = FaultPlan.make(workload: .seconds(120), faults: server, instances: 2, devices: 50, joining: 5, crashes: 10, seed: 7)
        let with = FaultPlan.make(
            workload: .seconds(120), faults: server.union(FaultKind.deviceSide), instances: 2, devices: 50, joining: 5, crashes: 10, seed: 7)
        #expect(with.filter { !FaultKind.deviceSide.contains($0.kind) } == without)
        #expect(with.count == without.count + 4)
    }

    /// An instance's PostgreSQL connections die silently at least once in every run, even the CI
    /// soak's minute, clear of what would hide whether both ends gave them up: a kill of that
    /// instance, a schema upgrade's restarts, a PostgreSQL restart. Switching it on moves
    /// nothing else.
    @Test func silentPostgresPathsAreWatchedClearOfRestartsAndMoveNothingElse() {
        // Freezes are planned after silent paths, clear of them: they move with them.
        let all = Set(FaultKind.switchable).subtracting([.postgresPathDies, .postgresFreezes])
        // The CI soak's: in a minute, a schema upgrade's restarts would leave no room.
        let ci: Set<FaultKind> = [
            .serverKill, .redisFlush, .snapshotRemoved, .deviceRestore, .deviceRevoke, .deviceRoleDowngrade, .deviceRotate, .databaseRestore,
            .redisPartition,
        ]
        var moved = 0
        let runs = [(60.0, 1, ci), (60, 3, ci), (600, 3, all), (1800, 2, all)] + [40.0, 50, 90, 150, 900, 3600].map { ($0, 1, all) }
        for (seconds, instances, others) in runs {
            for seed in UInt64(0)..<50 {
                let with = FaultPlan.make(
                    workload: .seconds(seconds), faults: others.union([.postgresPathDies]), instances: instances, devices: 50, joining: 3,
                    crashes: 5, seed: seed)
                let without = FaultPlan.make(
                    workload: .seconds(seconds), faults: others, instances: instances, devices: 50, joining: 3, crashes: 5, seed: seed)
                #expect(with.filter { $0.kind != .postgresPathDies } == without, "\(seconds) s, seed \(seed)")
                let silent = with.filter { $0.kind == .postgresPathDies }
                if runs.prefix(4).contains(where: { $0.0 == seconds && $0.1 == instances }) {
                    #expect(silent.count >= max(1, Int(seconds * 0.9 / FaultPlan.silentPathPeriod) - 1), "\(seconds) s, seed \(seed): \(silent.count)")
                }
                let period = min(FaultPlan.silentPathPeriod, seconds)
                for fault in silent {
                    let offset = (fault.at.inSeconds - period * FaultPlan.silentPathPhase).truncatingRemainder(dividingBy: FaultPlan.silentPathPeriod)
                    if abs(offset) > 0.001 { moved += 1 }
                    let watched = fault.at.inSeconds...(fault.at.inSeconds + SilentPathRecovery.bound.inSeconds)
                    #expect(fault.target < instances && watched.lowerBound < seconds * 0.9)
                    for other in with {
                        let at = other.at.inSeconds
                        let hides = switch other.kind {
                        // With 5 s either side: a process starting or stopping.
                        case .serverKill: other.target % instances == fault.target && ((at - 5)...(at + other.duration.inSeconds + 5)).overlaps(watched)
                        case .schemaUpgrade: (at...(at + Double(instances) * SchemaUpgrade.pause.inSeconds)).overlaps(watched)
                        case .postgresRestart: (at...(at + 10)).overlaps(watched)
                        default: false
                        }
                        #expect(!hides, "\(seconds) s, seed \(seed): \(other.kind) at \(at) meets the silent path at \(fault.at)")
                    }
                }
            }
        }
        #expect(moved > 0, "no silent path had to be moved: the avoidance was not tested")
    }

    /// PostgreSQL freezes at least once in nine of ten 10-minute runs with every fault (their plan is
    /// crowded: the rest have no clear moment, and say so) and in every longer one; nothing else
    /// that needs PostgreSQL or watches it meets the freeze (nor comes within `freezeMargin` of
    /// it); switching it on leaves every other fault as it was.
    @Test func postgresFreezesFallClearOfEveryFaultThatNeedsPostgres() {
        var tenMinutesWithout = 0
        let all = Set(FaultKind.switchable)
        let harmless = FaultPlan.meetFreezes
        #expect(harmless == [.deviceCrash, .deviceJoin, .snapshotRemoved, .redisFlush, .redisRestart, .postgresFreezes])
        let span = FrozenPostgres.span.inSeconds
        for (seconds, instances) in [(600.0, 3), (600, 1), (900, 2), (1800, 3), (3600, 1)] {
            for seed in UInt64(0)..<50 {
                let with = FaultPlan.make(workload: .seconds(seconds), faults: all, instances: instances, devices: 50, joining: 3, crashes: 5, seed: seed)
                let without = FaultPlan.make(
                    workload: .seconds(seconds), faults: all.subtracting([.postgresFreezes]), instances: instances, devices: 50, joining: 3,
                    crashes: 5, seed: seed)
                #expect(with.filter { $0.kind != .postgresFreezes } == without, "\(seconds) s, seed \(seed)")
                let freezes = with.filter { $0.kind == .postgresFreezes }
                if seconds == 600 {
                    if freezes.isEmpty { tenMinutesWithout += 1 }
                } else {
                    #expect(freezes.count >= max(1, Int(seconds * 0.9 / FaultPlan.freezePeriod) - 1), "\(seconds) s, seed \(seed): \(freezes.count)")
                }
                for freeze in freezes {
                    let frozen = (freeze.at.inSeconds - FaultPlan.freezeMargin)...(freeze.at.inSeconds + span + FaultPlan.freezeMargin)
                    #expect(freeze.duration == FrozenPostgres.span && frozen.upperBound - FaultPlan.freezeMargin < seconds * 0.9)
                    #expect(freezes.allSatisfy { $0 == freeze || abs(($0.at - freeze.at).inSeconds) > span }, "freezes overlap")
                    for other in with where !harmless.contains(other.kind) {
                        // At the least from its start to its end (a device's restore: its copy and
                        // its restore); the planner adds what each needs after.
                        let at = other.at.inSeconds, end = at + other.duration.inSeconds
                        let busy = other.kind == .deviceRestore ? [at...at, end...end] : [at...end]
                        #expect(!busy.contains { $0.overlaps(frozen) }, "\(seconds) s, seed \(seed): \(other.kind) at \(other.at) meets the freeze at \(freeze.at)")
                    }
                }
            }
        }
        #expect(tenMinutesWithout <= 10, "\(tenMinutesWithout) of 100 ten-minute runs have no freeze")
    }

    /// A kill of an instance while it is cut from Redis (its new process would subscribe afresh and
    /// hide whether the cut one noticed its dead subscription) is moved out of the cut.
    @Test func noInstanceIsKilledWhileItIsCutFromRedis() {
        let enabled: Set<FaultKind> = [.serverKill, .redisPartition, .deviceRevoke]
        var moved = 0
        for seed in UInt64(0)..<200 {
            let plan = FaultPlan.make(workload: .seconds(60), faults: enabled, instances: 1, devices: 50, joining: 0, crashes: 0, seed: seed)
            let without = FaultPlan.make(
                workload: .seconds(60), faults: enabled.subtracting([.redisPartition]), instances: 1, devices: 50, joining: 0, crashes: 0, seed: seed)
            let cuts = plan.filter { $0.kind == .redisPartition }
            let kills = plan.filter { $0.kind == .serverKill }
            #expect(kills.count == without.filter { $0.kind == .serverKill }.count)
            for kill in kills {
                #expect(!cuts.contains { kill.at <= $0.at + $0.duration + PartitionRecovery.bound && kill.at + kill.duration >= $0.at - .seconds(5) },
                    "seed \(seed): kill at \(kill.at) within a cut")
            }
            if kills.map(\.at) != without.filter({ $0.kind == .serverKill }).map(\.at) { moved += 1 }
        }
        #expect(moved > 0, "no seed planned a kill within a cut: nothing was tested")
    }

    /// A schema upgrade restarts every instance: a periodic cut that would meet it (or the look
    /// for its new subscription after the heal) is moved past it, not dropped.
    @Test func aPartitionIsMovedPastASchemaUpgradesRestarts() {
        for seed in UInt64(0)..<20 {
            let with = FaultPlan.make(
                workload: .seconds(600), faults: [.redisPartition, .schemaUpgrade], instances: 3, devices: 50, joining: 0, crashes: 0, seed: seed)
            let without = FaultPlan.make(workload: .seconds(600), faults: [.redisPartition], instances: 3, devices: 50, joining: 0, crashes: 0, seed: seed)
            guard let upgrade = with.first(where: { $0.kind == .schemaUpgrade }) else {
                Issue.record("seed \(seed): no schema upgrade planned")
                continue
            }
            let cuts = with.filter { $0.kind == .redisPartition }
            #expect(cuts.count == without.filter { $0.kind == .redisPartition }.count, "seed \(seed)")
            #expect(cuts.map(\.cut) == without.filter { $0.kind == .redisPartition }.map(\.cut))
            for cut in cuts {
                let upgradeEnd = upgrade.at + .seconds(3 * (SchemaUpgrade.pause.inSeconds + 10))
                #expect(cut.at > upgradeEnd || cut.at + cut.duration + PartitionRecovery.bound < upgrade.at - .seconds(5),
                    "seed \(seed): cut at \(cut.at) meets the upgrade at \(upgrade.at)")
            }
        }
    }

    @Test func partitionsFromRedisTakeTurnsAndLeaveTheOtherFaultsOfASeedAsTheyWere() {
        let others: Set<FaultKind> = [.serverKill, .redisFlush, .redisRestart]
        let without = FaultPlan.make(workload: .seconds(1800), faults: others, instances: 3, devices: 50, joining: 5, crashes: 10, seed: 11)
        let with = FaultPlan.make(
            workload: .seconds(1800), faults: others.union([.redisPartition]), instances: 3, devices: 50, joining: 5, crashes: 10, seed: 11)
        // A kill of a cut instance is moved out of its cut (from 5 s before to the soak's look after); nothing else moves.
        #expect(with.filter { $0.kind != .redisPartition && $0.kind != .serverKill } == without.filter { $0.kind != .serverKill })
        let partitions = with.filter { $0.kind == .redisPartition }
        let kills = with.filter { $0.kind == .serverKill }, killsWithout = without.filter { $0.kind == .serverKill }
        #expect(kills.count == killsWithout.count)
        #expect(Set(kills.map { "\($0.target) \($0.duration)" }) == Set(killsWithout.map { "\($0.target) \($0.duration)" }))
        for kill in kills {
            #expect(!partitions.contains { cut in
                cut.target == kill.target && kill.at <= cut.at + cut.duration + PartitionRecovery.bound
                    && kill.at + kill.duration >= cut.at - .seconds(5)
            }, "kill at \(kill.at) of instance \(kill.target) within a cut of it")
        }
        #expect(partitions.map(\.at) == [144, 504, 864, 1224, 1584].map { .seconds($0) })
        #expect(partitions.map(\.cut) == [.drop, .reset, .silent, .drop, .reset])
        #expect(partitions.allSatisfy { (0..<3).contains($0.target) && $0.duration >= .seconds(15) && $0.duration <= .seconds(25) })
        #expect(Set(partitions.map(\.target)).count > 1, "the instance cut is drawn")
        let short = FaultPlan.make(workload: .seconds(60), faults: [.redisPartition], instances: 2, devices: 50, joining: 0, crashes: 0, seed: 11)
        #expect(short.map(\.at) == [.seconds(24)])
        #expect(short.first.map { $0.duration <= .seconds(6) } == true, "a tenth of a short run")
    }

    /// With Redis restarts too in the longer runs: a partition never overlaps one, and the
    /// revocation's is left out when it would (most seeds still have it).
    @Test(arguments: [(60, false), (600, true), (1800, true)])
    func aPartitionCutsTheRevokedDevicesInstanceSilentlyJustBeforeItsRevocation(seconds: Int, restarts: Bool) {
        var tied = 0
        for seed: UInt64 in 1...20 {
            let faults: Set<FaultKind> = restarts ? [.redisPartition, .deviceRevoke, .redisRestart] : [.redisPartition, .deviceRevoke]
            let plan = FaultPlan.make(
                workload: .seconds(seconds), faults: faults, instances: 3, devices: 50, joining: 0, crashes: 0, seed: seed)
            let partitions = plan.filter { $0.kind == .redisPartition }
            // One at a time: no two partitions overlap, and none a Redis restart.
            for (a, b) in zip(partitions, partitions.dropFirst()) { #expect(a.at + a.duration <= b.at, "seed \(seed)") }
            for restart in plan where restart.kind == .redisRestart {
                #expect(!partitions.contains { $0.at <= restart.at && restart.at <= $0.at + $0.duration }, "seed \(seed)")
            }
            guard let revocation = plan.first(where: { $0.kind == .deviceRevoke }),
                let around = partitions.first(where: { $0.at <= revocation.at && $0.at + $0.duration > revocation.at })
            else { continue }
            tied += 1
            #expect(around.cut == .silent, "seed \(seed)")
            #expect(around.target == revocation.target % 3, "seed \(seed): the revoked device's own instance")
            let lead = (revocation.at - around.at).inSeconds
            #expect(lead >= 3 && lead <= 6, "seed \(seed): cut \(lead) s before the revocation")
            #expect(around.at + around.duration >= revocation.at + .seconds(4.99), "seed \(seed): still cut well after it")
        }
        #expect(tied >= (restarts ? 10 : 20), "\(tied) of 20 seeds cut the revoked device's instance")
    }

    @Test func aLongRunRepeatsDeviceSideFaultsOnOtherDevices() {
        let plan = FaultPlan.make(
            workload: .seconds(1800), faults: Set(FaultKind.deviceSide), instances: 1, devices: 200, joining: 0, crashes: 0, seed: 3)
        func count(_ kind: FaultKind) -> Int { plan.filter { $0.kind == kind }.count }
        #expect(count(.deviceRestore) == 5)
        #expect(count(.deviceRevoke) == 3)
        #expect((3...4).contains(count(.deviceRoleDowngrade)))
        #expect(count(.deviceRotate) == 4)
        let targets = plan.map(\.target)
        #expect(Set(targets).count == targets.count)
        #expect(plan.allSatisfy { $0.at < .seconds(1620) })
    }

    @Test func aFewDevicesStillGetEveryDeviceSideFault() {
        let plan = FaultPlan.make(workload: .seconds(60), faults: Set(FaultKind.deviceSide), instances: 1, devices: 3, joining: 0, crashes: 3, seed: 1)
            .filter { $0.kind != .deviceCrash }
        #expect(plan.count == 3, "no rotation: it would share a device")
        #expect(!plan.contains { $0.kind == .deviceRotate })
        #expect(plan.first { $0.kind == .deviceRoleDowngrade }.map { DeviceRole.of($0.target) } == DeviceRole.member)
        #expect(FaultPlan.make(workload: .seconds(60), faults: Set(FaultKind.deviceSide), instances: 1, devices: 0, joining: 0, crashes: 0, seed: 1).isEmpty)
    }
}

@Suite struct FaultSelectionTests {
    @Test func allSwitchesOnEveryServerAndDeviceSideFault() throws {
        #expect(try FaultSelection.parse("all") == Set(FaultKind.switchable))
        #expect(Set(FaultKind.switchable) == [
            .serverKill, .redisFlush, .redisRestart, .postgresRestart, .postgresRefuses, .snapshotRemoved, .schemaUpgrade, .databaseRestore,
            .redisPartition, .postgresPathDies, .postgresFreezes, .deviceRestore, .deviceRevoke, .deviceRoleDowngrade, .deviceRotate,
        ])
        #expect(try FaultSelection.parse("none").isEmpty)
        #expect(try FaultSelection.parse("") .isEmpty)
    }

    @Test func namesAreTheOptionsSpellingOrTheReports() throws {
        #expect(try FaultSelection.parse("server-kill, device-restore,device-revoke,device_role_downgrade")
            == [.serverKill, .deviceRestore, .deviceRevoke, .deviceRoleDowngrade])
        #expect(FaultKind.deviceRoleDowngrade.optionName == "device-role-downgrade")
        let error = #expect(throws: SoakError.self) { try FaultSelection.parse("device-crash") }
        #expect(error?.description.contains("device-restore, device-revoke, device-role-downgrade, device-rotate, all or none") == true)
    }
}

@Suite struct SeedPlanTests {
    @Test func aboutTheTargetInDependencyOrderAndTheSameForTheSameSeed() {
        let plan = SeedPlan(target: 20_000, seed: 5)
        #expect(abs(plan.rows.count - 20_000) < 400)
        #expect(Set(plan.rows.map(\.entity)).count == 13)
        // Every reference names a record created earlier (a smaller-magnitude temporary id).
        for row in plan.rows {
            for (name, value) in row.attributes where name.hasSuffix("_id") {
                if case .integer(let target) = value { #expect(target < 0 && target > row.temporaryId, "\(row.entity).\(name)") }
            }
        }
        #expect(SeedPlan(target: 20_000, seed: 5).rows.map(\.attributes) == plan.rows.map(\.attributes))
        #expect(SeedPlan(target: 20_000, seed: 6).rows.map(\.attributes) != plan.rows.map(\.attributes))
    }

    @Test func changeSetsCarryEveryRowOnceInOrder() {
        let plan = SeedPlan(target: 1_000, seed: 1)
        let sets = plan.changeSets(ofSize: 300)
        #expect(sets.map(\.seq) == (1...Int64(sets.count)).map { $0 })
        let created = sets.flatMap { set in set.types.flatMap { set.entities[$0]?.create ?? [] } }
        #expect(created.sorted() == plan.rows.map(\.temporaryId).sorted())
        #expect(sets.allSatisfy { set in set.entities.values.reduce(0) { $0 + $1.create.count } <= 300 })
    }
}

@Suite struct LinkKnobsTests {
    @Test func knobsOverrideThePresetAndNothingElse() throws {
        var knobs = LinkKnobs()
        #expect(knobs.apply(to: .terrible) == .terrible)
        knobs.latency = .milliseconds(40)
        knobs.bandwidth = 0
        knobs.dropAfterCommit = 0.5
        knobs.offline = .some(nil)
        let profile = knobs.apply(to: .terrible)
        #expect(profile.upstreamLatency.base == .milliseconds(40))
        #expect(profile.downstreamLatency.jitter == LinkProfile.terrible.downstreamLatency.jitter)
        #expect(profile.bandwidth == nil)
        #expect(profile.faults.dropAfterCommit == 0.5)
        #expect(profile.faults.refuse == LinkProfile.terrible.faults.refuse)
        #expect(profile.offlineSchedule == nil)
    }

    @Test func offlineWindowsParse() throws {
        #expect(try LinkKnobs.parseOffline("never") == nil)
        let schedule = try LinkKnobs.parseOffline("20-180/5-120")
        #expect(schedule?.online == .seconds(20) ... .seconds(180))
        #expect(schedule?.offline == .seconds(5) ... .seconds(120))
        #expect(throws: SoakError.self) { try LinkKnobs.parseOffline("20/5") }
        #expect(throws: SoakError.self) { try LinkKnobs.parseOffline("9-3/1-2") }
    }
}

@Suite struct WorkloadTests {
    @Test func everyActionIsDrawnInRoughlyItsShare() {
        var random = SplitMix64(seed: 3)
        var counts: [WorkloadAction: Int] = [:]
        for _ in 0..<10_000 { counts[WorkloadAction.pick(&random), default: 0] += 1 }
        #expect(WorkloadAction.allCases.map(\.weight).reduce(0, +) == 100)
        for action in WorkloadAction.allCases {
            let share = Double(counts[action, default: 0]) / 100
            #expect(abs(share - Double(action.weight)) < 2, "\(action): \(share) %")
        }
    }
}
