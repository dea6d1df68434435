import RevsyncDevice
import RevsyncWire

/// The permanent ids of the seeded records, by entity: what the workload picks from.
public struct SeedIndex: Sendable {
    public var ids: [String: [Int64]]
    public var records: Int { ids.values.reduce(0) { $0 + $1.count } }
    /// The head revision once seeding was done.
    public var revision: Int64
}

/// Loads the starting dataset through the server's own `/sync`, as an admin
/// device, in change sets of `batchSize` records, so the log and the tables
/// are exactly what the server would make of them.
struct DatasetSeeder {
    let baseURL: String
    let adminToken: String
    var batchSize = 2_000

    func seed(records target: Int, seed: UInt64) async throws -> SeedIndex {
        let transport = HTTPSyncTransport(configuration: .init(baseURL: baseURL))
        do {
            let index = try await load(SeedPlan(target: target, seed: seed), transport: transport)
            try await transport.shutdown()
            return index
        } catch {
            try? await transport.shutdown()
            throw error
        }
    }

    private func load(_ plan: SeedPlan, transport: HTTPSyncTransport) async throws -> SeedIndex {
        let device = try await transport.register(
            DeviceRegistration(name: "soak-seeder", user: "seeder", role: "admin"), adminToken: adminToken)
        var ids: [String: [Int64]] = [:]
        var maxRevision: Int64 = 0
        for changeSet in plan.changeSets(ofSize: batchSize) {
            let response = try await transport.sync(SyncRequest(maxRevision: maxRevision, changeSets: [changeSet]), token: device.token)
            maxRevision = response.maxRevision
            guard let ack = response.changeSets.first(where: { $0.seq == changeSet.seq }), ack.reason == nil else {
                let reason = response.changeSets.first(where: { $0.seq == changeSet.seq })?.reason
                throw SoakError("seeding: the server did not accept change set \(changeSet.seq ?? 0): \(reason.map { "\($0)" } ?? "no answer")")
            }
            for (entity, changes) in ack.entities {
                ids[entity, default: []] += changes.create
            }
        }
        return SeedIndex(ids: ids, revision: maxRevision)
    }
}
