import RevsyncTestSupport
import PostgresNIO
import RevsyncWire
@testable import RevsyncServer

/// Ids of a small dataset every test can build on.
struct Basics: Sendable {
    let league: Int64
    let team: Int64
    let screen: Int64
    let screenItem: Int64
    let user: Int64
    let player: Int64
    let revision: Int64
}

extension TestHarness {
    /// Creates a league, team, screen, screen item, user and player in one change set of `device` (an admin).
    /// Temporary ids are -(100·seq + 1…6): unique per device, as the contract demands.
    func seedBasics(_ device: TestDevice, seq: Int64 = 1) async throws -> Basics {
        let base = -100 * seq
        let set = changeSet(
            seq: seq,
            ("leagues", EntityChanges(create: [(base - 1)], attributes: [(base - 1): ["name": "Youth League"]])),
            ("teams", EntityChanges(create: [(base - 2)], attributes: [(base - 2): ["name": "U12", "league_id": .integer(base - 1)]])),
            ("screens", EntityChanges(create: [(base - 3)], attributes: [(base - 3): ["name": "Sprint", "team_id": .integer(base - 2), "sort_order": 1]])),
            ("screen_items", EntityChanges(create: [(base - 4)], attributes: [(base - 4): ["screen_id": .integer(base - 3), "label": "100 m", "kind": "time", "sort_order": 1]])),
            ("users", EntityChanges(create: [(base - 5)], attributes: [(base - 5): ["first_name": "Florian", "last_name": "Kugler", "date_of_birth": "1979-09-12 00:00:00.000+00"]])),
            ("players", EntityChanges(create: [(base - 6)], attributes: [(base - 6): ["user_id": .integer(base - 5), "team_id": .integer(base - 2), "number": 7]])))
        let response = try await sync(device, from: 0, [set])
        guard let ack = response.committed.last, let revision = ack.revision else {
            throw TestSetupError("seeding was not acknowledged: \(response)")
        }
        func id(_ entity: String, _ offset: Int64) throws -> Int64 {
            let temporary = base + offset
            guard let id = ack.permanentId(of: temporary, in: entity) else { throw TestSetupError("no id for \(entity) \(temporary)") }
            return id
        }
        return Basics(
            league: try id("leagues", -1), team: try id("teams", -2), screen: try id("screens", -3),
            screenItem: try id("screen_items", -4), user: try id("users", -5), player: try id("players", -6), revision: revision)
    }

    /// Sets the next id an entity's sequence hands out.
    func setNextId(_ entity: String, _ next: Int64) async throws {
        _ = try await rows(PostgresQuery(unsafeSQL: "SELECT setval(pg_get_serial_sequence('\(entity)', 'id'), \(next - 1))"))
    }
}

extension ChangeSet {
    /// The permanent id an acknowledgement gives a temporary id.
    func permanentId(of temporary: Int64, in entity: String) -> Int64? {
        entities[entity]?.attributes.first { $0.value[ReservedAttribute.oldId] == .integer(temporary) }?.key
    }

    /// Every (entity, id) the change set creates, updates or deletes.
    var touched: Set<String> {
        var keys: Set<String> = []
        for (entity, changes) in entities {
            for id in changes.create + changes.update + changes.delete { keys.insert("\(entity) \(id)") }
        }
        return keys
    }
}
