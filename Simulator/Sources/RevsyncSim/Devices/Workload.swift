import RevsyncDevice
import RevsyncLink
import RevsyncWire

/// The shared records every device keeps touching, so that conflicts really
/// happen: concurrent updates (stale revisions), edits of records an admin
/// deleted, forbidden deletes, creates under deleted parents.
public struct HotSet: Sendable {
    public var records: [(entity: String, id: Int64)]

    /// The first `size` seeded records of the entities members may edit, spread evenly.
    init(seed: SeedIndex, size: Int) {
        let entities = ["screen_items", "notes", "screen_instances", "players", "trainings"]
        let perEntity = max(1, size / entities.count)
        records = entities.flatMap { entity in (seed.ids[entity] ?? []).prefix(perEntity).map { (entity, $0) } }
    }
}

/// One user action, decided from the device's seeded random sequence.
enum WorkloadAction: CaseIterable {
    /// A screen with items, an instance of it and the instance's items: a tree of temporary ids.
    case createScreenTree
    /// A training with attendances of seeded players.
    case createTraining
    /// A note on a hot player (fails as `reference` if an admin deleted the player meanwhile).
    case createNoteOnHotPlayer
    case updateHot
    case updateSeeded
    case updateOwn
    /// Members delete hot notes or screen items; admins anything hot; members whose app skips
    /// the permission check try hot screen instances (the case study's forbidden delete).
    case deleteHot
    case deleteOwn

    /// Relative weights, out of 100.
    var weight: Int {
        switch self {
        case .createScreenTree: 12
        case .createTraining: 8
        case .createNoteOnHotPlayer: 8
        case .updateHot: 28
        case .updateSeeded: 18
        case .updateOwn: 12
        case .deleteHot: 7
        case .deleteOwn: 7
        }
    }

    static func pick(_ random: inout SplitMix64) -> WorkloadAction {
        var roll = Int(random.next() % 100)
        for action in allCases {
            if roll < action.weight { return action }
            roll -= action.weight
        }
        return .updateSeeded
    }
}

/// What one executed action did, for the counters.
struct ActionResult: Sendable {
    var creates = 0
    var updates = 0
    var deletes = 0
    /// The records created (temporary ids), for later `updateOwn`/`deleteOwn`.
    var created: [(entity: String, id: Int64)] = []

    var isEmpty: Bool { creates + updates + deletes == 0 }
}

/// Turns actions into local transactions on a device's engine.
struct WorkloadRunner {
    let seed: SeedIndex
    let hot: HotSet
    let role: String

    /// Runs `action` as one transaction. Returns nil when there was nothing to
    /// do (e.g. the chosen record is already gone locally).
    func run(
        _ action: WorkloadAction, on engine: SyncEngine, own: [(entity: String, id: Int64)], random: inout SplitMix64
    ) async throws -> ActionResult? {
        let words = ["blue", "fast", "late", "home", "away", "left", "wide", "calm", "sharp", "bold"]
        let word = words[Int(random.next() % UInt64(words.count))] + " \(random.next() % 1000)"
        let number = Int64(random.next() % 99) + 1
        switch action {
        case .createScreenTree:
            guard let team = pick("teams", &random) else { return nil }
            let itemCount = 2 + Int(random.next() % 3)
            return try await engine.transaction { tx in
                var result = ActionResult()
                let screen = try tx.create("screens", ["team_id": .integer(team), "name": .string("Screen \(word)"), "sort_order": .integer(number)])
                result.created.append(("screens", screen))
                var items: [Int64] = []
                for k in 0..<itemCount {
                    let item = try tx.create("screen_items", [
                        "screen_id": .integer(screen), "label": .string("Item \(k) \(word)"), "kind": "number", "sort_order": .integer(Int64(k)),
                    ])
                    items.append(item)
                    result.created.append(("screen_items", item))
                }
                let instance = try tx.create("screen_instances", [
                    "screen_id": .integer(screen), "date": "2026-11-22T09:00:00Z", "comment": .string(word),
                ])
                result.created.append(("screen_instances", instance))
                for item in items {
                    let value = try tx.create("screen_instance_items", [
                        "screen_instance_id": .integer(instance), "screen_item_id": .integer(item), "numeric_value": .double(Double(number) / 4),
                    ])
                    result.created.append(("screen_instance_items", value))
                }
                result.creates = result.created.count
                return result
            }
        case .createTraining:
            guard let team = pick("teams", &random) else { return nil }
            let players = (0..<3).compactMap { _ in pick("players", &random) }
            return try await engine.transaction { tx in
                var result = ActionResult()
                let training = try tx.create("trainings", ["team_id": .integer(team), "starts_at": "2026-12-01T18:00:00Z", "location": .string(word)])
                result.created.append(("trainings", training))
                for player in Set(players) {
                    guard try tx.record("players", id: player) != nil else { continue }
                    let attendance = try tx.create("attendances", [
                        "training_id": .integer(training), "player_id": .integer(player), "present": .bool(number % 2 == 0),
                    ])
                    result.created.append(("attendances", attendance))
                }
                result.creates = result.created.count
                return result
            }
        case .createNoteOnHotPlayer:
            let players = hot.records.filter { $0.entity == "players" }
            guard !players.isEmpty else { return nil }
            let player = players[Int(random.next() % UInt64(players.count))].id
            // Once the device has learned the upgraded schema (`schema-upgrade`), its notes carry the new attribute.
            var values: Attributes = ["player_id": .integer(player), "body": .string("Note \(word)"), "pinned": false]
            if await engine.schema?.entityIfKnown(SchemaUpgrade.entity)?.attributes.contains(where: { $0.name == SchemaUpgrade.attribute }) == true {
                values[SchemaUpgrade.attribute] = .string(word)
            }
            return try await engine.transaction { [values] tx in
                guard try tx.record("players", id: player) != nil else { return ActionResult() }
                let note = try tx.create("notes", values)
                return ActionResult(creates: 1, created: [("notes", note)])
            }
        case .updateHot:
            guard !hot.records.isEmpty else { return nil }
            let target = hot.records[Int(random.next() % UInt64(hot.records.count))]
            return try await update(target, on: engine, word: word, number: number)
        case .updateSeeded:
            let entities = ["screen_items", "notes", "players", "screen_instances", "trainings", "teams"]
            let entity = entities[Int(random.next() % UInt64(entities.count))]
            guard let id = pick(entity, &random) else { return nil }
            return try await update((entity, id), on: engine, word: word, number: number)
        case .updateOwn:
            guard !own.isEmpty else { return nil }
            return try await update(own[Int(random.next() % UInt64(own.count))], on: engine, word: word, number: number)
        case .deleteHot:
            let deletable: Set<String> =
                switch role {
                case "admin": ["screen_items", "notes", "screen_instances", "players", "trainings"]
                default: ["screen_items", "notes", "screen_instances", "trainings"]
                }
            let candidates = hot.records.filter { deletable.contains($0.entity) }
            guard !candidates.isEmpty else { return nil }
            return try await delete(candidates[Int(random.next() % UInt64(candidates.count))], on: engine)
        case .deleteOwn:
            let deletable = own.filter { ["screen_items", "screen_instance_items", "notes", "attendances", "trainings"].contains($0.entity) }
            guard !deletable.isEmpty else { return nil }
            return try await delete(deletable[Int(random.next() % UInt64(deletable.count))], on: engine)
        }
    }

    private func pick(_ entity: String, _ random: inout SplitMix64) -> Int64? {
        guard let ids = seed.ids[entity], !ids.isEmpty else { return nil }
        return ids[Int(random.next() % UInt64(ids.count))]
    }

    private func update(_ target: (entity: String, id: Int64), on engine: SyncEngine, word: String, number: Int64) async throws -> ActionResult? {
        let values: Attributes =
            switch target.entity {
            case "screen_items": ["label": .string(word)]
            case "notes": ["body": .string(word), "pinned": .bool(number % 3 == 0)]
            case "players": ["number": .integer(number), "position": .string(["GK", "DF", "MF", "FW"][Int(number % 4)])]
            case "screen_instances": ["comment": .string(word)]
            case "trainings": ["location": .string(word)]
            case "teams": ["city": .string(word)]
            case "screens": ["name": .string(word)]
            case "screen_instance_items": ["numeric_value": .double(Double(number) / 8)]
            case "attendances": ["present": .bool(number % 2 == 0)]
            default: [:]
            }
        guard !values.isEmpty else { return nil }
        return try await engine.transaction { tx in
            guard try tx.record(target.entity, id: target.id) != nil else { return ActionResult() }
            try tx.update(target.entity, id: target.id, values)
            return ActionResult(updates: 1)
        }
    }

    private func delete(_ target: (entity: String, id: Int64), on engine: SyncEngine) async throws -> ActionResult? {
        try await engine.transaction { tx in
            guard try tx.record(target.entity, id: target.id) != nil else { return ActionResult() }
            try tx.delete(target.entity, id: target.id)
            return ActionResult(deletes: 1)
        }
    }
}
