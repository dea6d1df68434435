import RevsyncLink
import RevsyncWire
import Testing
@testable import RevsyncSim

@Suite struct FaultPlanTests {
    @Test func theSameSeedPlansTheSameFaults() {
        let a = FaultPlan.make(workload: .seconds(120), serverFaults: [.serverKill, .redisFlush], instances: 3, devices: 50, joining: 5, crashes: 10, seed: 9)
        let b = FaultPlan.make(workload: .seconds(120), serverFaults: [.serverKill, .redisFlush], instances: 3, devices: 50, joining: 5, crashes: 10, seed: 9)
        let c = FaultPlan.make(workload: .seconds(120), serverFaults: [.serverKill, .redisFlush], instances: 3, devices: 50, joining: 5, crashes: 10, seed: 10)
        #expect(a == b)
        #expect(a != c)
        #expect(a.map(\.at) == a.map(\.at).sorted())
    }

    @Test func aShortRunHasEachServerFaultOnceAndEveryCrashAndJoin() {
        let plan = FaultPlan.make(workload: .seconds(120), serverFaults: [.serverKill, .redisFlush], instances: 1, devices: 50, joining: 5, crashes: 10, seed: 1)
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
        #expect(kill.map { $0.downtime >= .seconds(2) && $0.downtime <= .seconds(5) } == true)
    }

    @Test func aLongRunRepeatsEachServerFaultAtItsPeriod() {
        let plan = FaultPlan.make(
            workload: .seconds(1800), serverFaults: Set(FaultKind.serverSide), instances: 3, devices: 50, joining: 0, crashes: 0, seed: 2)
        func times(_ kind: FaultKind) -> [Duration] { plan.filter { $0.kind == kind }.map(\.at) }
        #expect(times(.serverKill) == [105, 405, 705, 1005, 1305, 1605].map { .seconds($0) })
        #expect(times(.redisFlush) == [210, 630, 1050, 1470].map { .seconds($0) })
        #expect(times(.redisRestart) == [429, 1089].map { .seconds($0) })
        #expect(times(.postgresRestart) == [624, 1404].map { .seconds($0) })
        #expect(plan.filter { $0.kind == .serverKill }.allSatisfy { (0..<3).contains($0.target) })
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
