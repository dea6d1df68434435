import RevsyncWire
import Testing

@testable import RevsyncDevice

@Suite("Local transactions")
struct TransactionTests {
    @Test func createsGetDecreasingTemporaryIdsFromAPersistentCounter() throws {
        let store = try seededStore()
        let first = try edit(store) { tx in [try tx.create("leagues", ["name": "A"]), try tx.create("leagues", ["name": "B"])] }
        let second = try edit(store) { tx in try tx.create("leagues", ["name": "C"]) }
        #expect(first.value == [-1, -2])
        #expect(second.value == -3)
        #expect(first.changeSet?.seq == 1)
        #expect(second.changeSet?.seq == 2)
        #expect(try store.meta().nextTemporaryId == -4)
        #expect(try store.meta().nextSeq == 3)
        #expect(try store.record("leagues", id: -1) == DeviceRecord(id: -1, revision: 0, attributes: ["name": "A", "country": .null]))
    }

    @Test func aTransactionThatChangesNothingQueuesNothing() throws {
        let store = try seededStore()
        let result = try edit(store) { tx in try tx.record("teams", id: 10)?["name"] }
        #expect(result.value == "Owls")
        #expect(result.changeSet == nil)
        #expect(try store.outbox().isEmpty)
        #expect(try store.meta().nextSeq == 1)
    }

    @Test func editsThatCancelOutQueueNoEmptyChangeSet() throws {
        let store = try seededStore()
        let result = try edit(store) { tx in
            try tx.update("teams", id: 10, [:])
            let league = try tx.create("leagues", ["name": "Gone"])
            let team = try tx.create("teams", ["league_id": .integer(league), "name": "Gone too"])
            try tx.update("teams", id: team, ["city": "Nowhere"])
            try tx.delete("teams", id: team)
            try tx.delete("leagues", id: league)
        }
        #expect(result.changeSet == nil, "the server refuses a change set with no operations")
        #expect(try store.outbox().isEmpty)
        #expect(try store.meta().nextSeq == 1)
        #expect(try store.meta().nextTemporaryId == -1)
        #expect(try store.records("leagues", matching: .all).map(\.id) == [1])
    }

    @Test func valuesAreCheckedAndCanonicalized() throws {
        let store = try seededStore()
        let id = try edit(store) { tx in
            try tx.create("players", ["team_id": 10, "rating": 7, "active": false])
        }.value
        #expect(try store.record("players", id: id)?["rating"] == .double(7))
        let user = try edit(store) { tx in try tx.create("users", ["first_name": "Ana", "date_of_birth": "2001-02-03T04:05:06+02:00"]) }.value
        #expect(try store.record("users", id: user)?["date_of_birth"] == "2001-02-03 02:05:06+00")

        #expect(throws: DeviceError.missingAttribute(entity: "teams", attribute: "name")) {
            try edit(store) { tx in try tx.create("teams", ["league_id": 1]) }
        }
        #expect(throws: DeviceError.unknownAttribute(entity: "teams", attribute: "colour")) {
            try edit(store) { tx in try tx.update("teams", id: 10, ["colour": "red"]) }
        }
        #expect(throws: DeviceError.unknownAttribute(entity: "teams", attribute: "revision")) {
            try edit(store) { tx in try tx.update("teams", id: 10, ["revision": 99]) }
        }
        #expect(throws: DeviceError.self) { try edit(store) { tx in try tx.update("teams", id: 10, ["name": 5]) } }
        #expect(throws: DeviceError.self) { try edit(store) { tx in try tx.update("teams", id: 10, ["name": .null]) } }
        #expect(throws: DeviceError.unknownEntity("coaches")) { try edit(store) { tx in try tx.create("coaches", [:]) } }
        #expect(throws: DeviceError.referenceNotFound(entity: "teams", attribute: "league_id", id: 77)) {
            try edit(store) { tx in try tx.create("teams", ["league_id": 77, "name": "X"]) }
        }
    }

    @Test func updatesCarryTheBasisRevisionAndMergeWithinATransaction() throws {
        let store = try seededStore()
        let result = try edit(store) { tx in
            try tx.update("teams", id: 10, ["city": "York"])
            try tx.update("teams", id: 10, ["name": "Owls FC"])
        }
        let changes = try #require(result.changeSet?.entities["teams"])
        #expect(changes.update == [10])
        #expect(changes.attributes[10] == ["revision": 3, "city": "York", "name": "Owls FC"])
        #expect(try store.record("teams", id: 10)?.attributes == ["league_id": 1, "name": "Owls FC", "city": "York"])
        #expect(try store.record("teams", id: 10)?.revision == 3, "local edits keep the server revision")
    }

    @Test func anUpdateOfARecordCreatedInTheSameTransactionJoinsItsCreate() throws {
        let store = try seededStore()
        let result = try edit(store) { tx in
            let id = try tx.create("teams", ["league_id": 1, "name": "Hawks"])
            try tx.update("teams", id: id, ["city": "Bath"])
            return id
        }
        let changes = try #require(result.changeSet?.entities["teams"])
        #expect(changes.create == [result.value])
        #expect(changes.update.isEmpty)
        #expect(changes.attributes[result.value]?["city"] == "Bath")
    }

    @Test func anUnacknowledgedRecordIsUpdatedOnRevisionZero() throws {
        let store = try seededStore()
        let id = try edit(store) { tx in try tx.create("teams", ["league_id": 1, "name": "Hawks"]) }.value
        let result = try edit(store) { tx in try tx.update("teams", id: id, ["city": "Bath"]) }
        #expect(result.changeSet?.entities["teams"]?.attributes[id] == ["revision": 0, "city": "Bath"])
    }

    @Test func deletingARecordCreatedInTheSameTransactionLeavesNoTrace() throws {
        let store = try seededStore()
        let result = try edit(store) { tx in
            let team = try tx.create("teams", ["league_id": 1, "name": "Hawks"])
            let player = try tx.create("players", ["team_id": .integer(team)])
            try tx.create("notes", ["player_id": .integer(player), "body": "cascades too"])
            try tx.delete("teams", id: team)
        }
        #expect(result.changeSet == nil)
        #expect(store.tables["teams"]?.count == 1)
        #expect(store.tables["players"]?.isEmpty ?? true)
        #expect(store.tables["notes"]?.isEmpty ?? true)
    }

    @Test func deletingANewRecordClearsSetNullReferencesInTheChangeSet() throws {
        let store = try seededStore()
        let result = try edit(store) { tx in
            let user = try tx.create("users", ["first_name": "Ana"])
            let player = try tx.create("players", ["team_id": 10, "user_id": .integer(user)])
            try tx.delete("users", id: user)
            return player
        }
        #expect(result.changeSet?.types == ["players"])
        #expect(result.changeSet?.entities["players"]?.attributes[result.value]?["user_id"] == .null)
        #expect(try store.record("players", id: result.value)?["user_id"] == .null)
    }

    @Test func deletesCascadeAndClearReferencesLocally() throws {
        let store = try seededStore()
        try store.put("users", DeviceRecord(id: 5, revision: 2, attributes: ["first_name": "Ana", "date_of_birth": .null]))
        try store.put("players", DeviceRecord(id: 60, revision: 2, attributes: ["team_id": 10, "user_id": 5, "number": 4, "rating": .null, "active": .null]))
        try store.put("notes", DeviceRecord(id: 80, revision: 2, attributes: ["player_id": 60, "body": "x"]))
        let userDelete = try edit(store) { tx in try tx.delete("users", id: 5) }
        #expect(try store.record("players", id: 60)?["user_id"] == .null)
        #expect(userDelete.changeSet?.types == ["users"], "the server clears the reference itself")
        let teamDelete = try edit(store) { tx in try tx.delete("teams", id: 10) }
        #expect(try store.record("players", id: 60) == nil)
        #expect(try store.record("notes", id: 80) == nil)
        #expect(teamDelete.changeSet?.types == ["teams"], "the server cascades itself")
        #expect(teamDelete.changes.deleted == ["teams": [10], "players": [60], "notes": [80]])
    }

    @Test func restrictRefusesADeleteUnlessTheReferencingRecordGoesToo() throws {
        let store = try seededStore()
        #expect(throws: DeviceError.restricted(entity: "leagues", id: 1, referencedBy: RecordKey("teams", 10), attribute: "league_id")) {
            try edit(store) { tx in try tx.delete("leagues", id: 1) }
        }
        // In either order within one transaction, deleting the team as well is fine.
        let result = try edit(store) { tx in
            try tx.delete("leagues", id: 1)
            try tx.delete("teams", id: 10)
        }
        #expect(result.changeSet?.entities["leagues"]?.delete == [1])
        #expect(result.changeSet?.entities["teams"]?.delete == [10])
    }

    @Test func theRolesPermissionsAreEnforced() throws {
        let schema = try LocalSchema(TestSchema.document(leaguePermissions: .none))
        let store = try seededStore()
        #expect(throws: DeviceError.forbidden(entity: "leagues", operation: "create")) {
            try LocalEdit.perform(on: store, schema: schema) { tx in try tx.create("leagues", ["name": "X"]) }
        }
        #expect(throws: DeviceError.forbidden(entity: "leagues", operation: "update")) {
            try LocalEdit.perform(on: store, schema: schema) { tx in try tx.update("leagues", id: 1, ["name": "X"]) }
        }
    }

    @Test func aMappedTemporaryIdStillFindsTheRecord() throws {
        let store = try seededStore()
        try store.setTemporaryIdMapping(-40, to: TemporaryIdMapping(entity: "teams", id: 10))
        let result = try edit(store) { tx in
            let name = try tx.record("teams", id: -40)?["name"]
            try tx.update("teams", id: -40, ["city": "York"])
            try tx.create("players", ["team_id": -40])
            return name
        }
        #expect(result.value == "Owls")
        #expect(result.changeSet?.entities["teams"]?.update == [10])
        #expect(result.changeSet?.entities["players"]?.attributes[-1]?["team_id"] == 10)
    }

    @Test func updatingOrDeletingAMissingRecordFails() throws {
        let store = try seededStore()
        #expect(throws: DeviceError.recordNotFound(entity: "teams", id: 99)) {
            try edit(store) { tx in try tx.update("teams", id: 99, ["city": "x"]) }
        }
        #expect(throws: DeviceError.recordNotFound(entity: "teams", id: 99)) {
            try edit(store) { tx in try tx.delete("teams", id: 99) }
        }
    }

    @Test func aChangeSetOverTheOperationLimitIsRefused() throws {
        let store = try seededStore()
        #expect(throws: DeviceError.tooManyOperations(count: 3, limit: 2)) {
            try store.atomically {
                try LocalEdit.perform(on: store, schema: TestSchema.schema, maxOperations: 2) { tx in
                    try tx.create("leagues", ["name": "A"])
                    try tx.create("leagues", ["name": "B"])
                    try tx.update("teams", id: 10, ["city": "York"])
                }
            }
        }
        #expect(try store.outbox().isEmpty)
        #expect(try store.meta().nextTemporaryId == -1)
        #expect(try store.record("teams", id: 10)?["city"] == "Leeds")
        // A delete is one operation, however many records it cascades to locally.
        try store.put("players", DeviceRecord(id: 60, revision: 2, attributes: ["team_id": 10, "user_id": .null, "number": 4, "rating": .null, "active": .null]))
        let deleted = try store.atomically {
            try LocalEdit.perform(on: store, schema: TestSchema.schema, maxOperations: 1) { tx in try tx.delete("teams", id: 10) }
        }
        #expect(deleted.changeSet?.operationCount == 1)
        #expect(try store.record("players", id: 60) == nil)
    }
}
