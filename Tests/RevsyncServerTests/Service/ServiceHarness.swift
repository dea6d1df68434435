import Foundation
import Logging
import NIOCore
import RevsyncRules
import RevsyncTestSupport
import RevsyncWire
@testable import RevsyncServer

/// `SyncService` over in-memory stores: every rule of the contract, with no I/O.
struct ServiceHarness {
    let dataset: InMemoryDataset
    let service: SyncService
    let schema: DatasetSchema
    let admin: Device

    static let schema: DatasetSchema = {
        // The default schema ships with the repository; a failure here is a broken checkout.
        let data = try! Data(contentsOf: URL(fileURLWithPath: defaultSchemaPath))
        return try! SchemaLoader.load(data: data, file: defaultSchemaPath)
    }()

    init(configure: (inout ServerSettings.Limits) -> Void = { _ in }) {
        var limits = ServerSettings.Limits()
        configure(&limits)
        schema = Self.schema
        dataset = InMemoryDataset(schema: schema)
        service = SyncService(changeSets: dataset, changeLog: dataset, records: dataset, schema: schema, limits: limits, metrics: ServerMetrics())
        admin = dataset.addDevice(id: 1, role: "admin", name: "admin")
    }

    func device(_ id: Int64, role: String = "member") -> Device { dataset.addDevice(id: id, role: role) }

    func sync(_ device: Device, from maxRevision: Int64, _ changeSets: [ChangeSet] = []) async throws -> SyncResponse {
        let body = try await service.sync(SyncRequest(maxRevision: maxRevision, changeSets: changeSets), device: device, logger: Logger(label: "test"))
        return try JSONDecoder().decode(SyncResponse.self, from: Data(body.readableBytesView))
    }

    /// The refusal of a request the rules turn down whole.
    func refusal(_ device: Device, from maxRevision: Int64, _ changeSets: [ChangeSet] = []) async throws -> SyncRefusal? {
        do {
            _ = try await sync(device, from: maxRevision, changeSets)
            return nil
        } catch let refusal as SyncRefusal {
            return refusal
        }
    }

    var head: Int64 { dataset.withState { $0.head } }

    func count(_ entity: String) -> Int { dataset.withState { $0.records[entity]?.count ?? 0 } }

    func values(_ entity: String, _ id: Int64) -> Attributes? { dataset.withState { $0.records[entity]?[id]?.values } }

    /// A league, a team, a screen with an item, a user and a player, created by the admin as seq 1.
    func seed() async throws -> Seeded {
        let response = try await sync(admin, from: 0, [changeSet(
            seq: 1,
            ("leagues", EntityChanges(create: [-1], attributes: [-1: ["name": "Youth League"]])),
            ("teams", EntityChanges(create: [-2], attributes: [-2: ["name": "U12", "league_id": -1]])),
            ("screens", EntityChanges(create: [-3], attributes: [-3: ["name": "Sprint", "team_id": -2, "sort_order": 1]])),
            ("screen_items", EntityChanges(create: [-4], attributes: [-4: ["screen_id": -3, "label": "100 m", "kind": "time", "sort_order": 1]])),
            ("users", EntityChanges(create: [-5], attributes: [-5: ["first_name": "Florian", "last_name": "Kugler"]])),
            ("players", EntityChanges(create: [-6], attributes: [-6: ["user_id": -5, "team_id": -2, "number": 7]])))])
        guard let ack = response.changeSets.first, ack.conflict == false, let revision = ack.revision else {
            throw TestSetupError("seeding was not acknowledged: \(response)")
        }
        func id(_ entity: String, _ temporary: Int64) throws -> Int64 {
            guard let id = ack.entities[entity]?.attributes.first(where: { $0.value[ReservedAttribute.oldId] == .integer(temporary) })?.key else {
                throw TestSetupError("no id for \(entity) \(temporary)")
            }
            return id
        }
        return Seeded(
            league: try id("leagues", -1), team: try id("teams", -2), screen: try id("screens", -3), screenItem: try id("screen_items", -4),
            user: try id("users", -5), player: try id("players", -6), revision: revision)
    }
}

struct Seeded {
    let league: Int64, team: Int64, screen: Int64, screenItem: Int64, user: Int64, player: Int64, revision: Int64
}
