import RevsyncWire

@testable import RevsyncDevice

/// A small dataset schema with every on-delete rule:
/// teams → leagues (restrict), players → teams (cascade), players → users (set null),
/// notes → players (cascade).
enum TestSchema {
    static func document(permissions: Permissions = .all, leaguePermissions: Permissions = .all, playerPermissions: Permissions? = nil) -> SchemaDocument {
        SchemaDocument(version: 1, entities: [
            EntityDescription(name: "leagues", attributes: [
                AttributeDescription(name: "name", type: .string, nullable: false),
                AttributeDescription(name: "country", type: .string, nullable: true),
            ], permissions: leaguePermissions),
            EntityDescription(name: "teams", attributes: [
                AttributeDescription(name: "league_id", type: .integer, nullable: false, references: "leagues", onDelete: .restrict),
                AttributeDescription(name: "name", type: .string, nullable: false),
                AttributeDescription(name: "city", type: .string, nullable: true),
            ], permissions: permissions),
            EntityDescription(name: "users", attributes: [
                AttributeDescription(name: "first_name", type: .string, nullable: false),
                AttributeDescription(name: "date_of_birth", type: .timestamp, nullable: true),
            ], permissions: permissions),
            EntityDescription(name: "players", attributes: [
                AttributeDescription(name: "team_id", type: .integer, nullable: false, references: "teams", onDelete: .cascade),
                AttributeDescription(name: "user_id", type: .integer, nullable: true, references: "users", onDelete: .setNull),
                AttributeDescription(name: "number", type: .integer, nullable: true),
                AttributeDescription(name: "rating", type: .double, nullable: true),
                AttributeDescription(name: "active", type: .boolean, nullable: true),
            ], permissions: playerPermissions ?? permissions),
            EntityDescription(name: "notes", attributes: [
                AttributeDescription(name: "player_id", type: .integer, nullable: true, references: "players", onDelete: .cascade),
                AttributeDescription(name: "body", type: .string, nullable: false),
            ], permissions: permissions),
        ])
    }

    static let schema: LocalSchema = {
        do { return try LocalSchema(document()) } catch { fatalError("test schema: \(error)") }
    }()
}

extension ChangeSet {
    mutating func create(_ entity: String, _ id: Int64, _ values: Attributes) {
        self[entity].create.append(id)
        self[entity].attributes[id] = values
    }

    mutating func update(_ entity: String, _ id: Int64, _ values: Attributes) {
        self[entity].update.append(id)
        self[entity].attributes[id] = values
    }

    mutating func delete(_ entity: String, _ id: Int64, _ values: Attributes? = nil) {
        self[entity].delete.append(id)
        if let values { self[entity].attributes[id] = values }
    }

    /// A committed change set as a response carries it.
    static func committed(_ revision: Int64, seq: Int64? = nil, _ build: (inout ChangeSet) -> Void) -> ChangeSet {
        var changeSet = ChangeSet(seq: seq, conflict: false, revision: revision)
        build(&changeSet)
        return changeSet
    }

    /// A corrective change set.
    static func corrective(seq: Int64, _ code: ConflictReason.Code, _ build: (inout ChangeSet) -> Void) -> ChangeSet {
        var changeSet = ChangeSet(
            seq: seq, conflict: true, reason: ConflictReason(code: code, entity: nil, id: nil, message: "test"))
        build(&changeSet)
        return changeSet
    }
}

/// A store holding a league 1 and a team 10 at revision 3, `maxRevision` 3, bootstrapped.
func seededStore() throws -> InMemoryRecordStore {
    let store = InMemoryRecordStore(meta: DeviceMeta(maxRevision: 3, bootstrapped: true))
    try store.put("leagues", DeviceRecord(id: 1, revision: 1, attributes: ["name": "Premier", "country": .null]))
    try store.put("teams", DeviceRecord(id: 10, revision: 3, attributes: ["league_id": 1, "name": "Owls", "city": "Leeds"]))
    return store
}

/// Runs a local transaction on an in-memory store.
@discardableResult
func edit<Value>(_ store: InMemoryRecordStore, _ body: (Transaction) throws -> Value) throws -> LocalEditResult<Value> {
    try store.atomically { try LocalEdit.perform(on: store, schema: TestSchema.schema, body) }
}
