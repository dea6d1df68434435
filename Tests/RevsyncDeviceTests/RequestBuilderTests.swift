import RevsyncWire
import Testing

@testable import RevsyncDevice

@Suite("Building requests")
struct RequestBuilderTests {
    @Test func sendsThePendingChangeSetsInSeqOrderWithMaxRevision() throws {
        let store = try seededStore()
        try edit(store) { tx in try tx.update("teams", id: 10, ["city": "A"]) }
        try edit(store) { tx in try tx.create("leagues", ["name": "Second"]) }
        try edit(store) { tx in try tx.update("teams", id: 10, ["city": "C"]) }
        let request = try RequestBuilder.build(from: store, schema: TestSchema.schema)
        #expect(request.maxRevision == 3)
        #expect(request.changeSets.map(\.seq) == [1, 2, 3])
        #expect(request.changeSets[0].entities["teams"]?.attributes[10] == ["city": "A", "revision": 3])
        #expect(request.changeSets[1].entities["leagues"]?.create == [-1])
    }

    @Test func limitSendsTheOldestFirst() throws {
        let store = try seededStore()
        for city in ["A", "B", "C", "D"] {
            try edit(store) { tx in try tx.update("teams", id: 10, ["city": .string(city)]) }
        }
        let request = try RequestBuilder.build(from: store, schema: TestSchema.schema, limit: 2)
        #expect(request.changeSets.map(\.seq) == [1, 2])
    }

    @Test func mappedTemporaryIdsAreRewrittenButCreatesKeepTheirs() throws {
        let store = try seededStore()
        let (team, player) = try edit(store) { tx in
            let team = try tx.create("teams", ["league_id": 1, "name": "Hawks"])
            return (team, try tx.create("players", ["team_id": .integer(team)]))
        }.value
        try edit(store) { tx in
            try tx.update("teams", id: team, ["city": "Bath"])
            try tx.update("players", id: player, ["number": 3])
        }
        // The server committed seq 1 but the device has only learnt the team's id.
        try store.setTemporaryIdMapping(team, to: TemporaryIdMapping(entity: "teams", id: 500))
        let request = try RequestBuilder.build(from: store, schema: TestSchema.schema)
        #expect(request.changeSets[0].entities["teams"]?.create == [team])
        #expect(request.changeSets[0].entities["players"]?.attributes[player]?["team_id"] == 500)
        #expect(request.changeSets[1].entities["teams"]?.update == [500])
        #expect(request.changeSets[1].entities["teams"]?.attributes[500]?["revision"] == 0)
        #expect(request.changeSets[1].entities["players"]?.update == [player], "an unmapped temporary id stays")
    }

    @Test func theRequestEncodesAsTheContractSays() throws {
        let store = try seededStore()
        try edit(store) { tx in
            let team = try tx.create("teams", ["league_id": 1, "name": "Hawks"])
            try tx.create("players", ["team_id": .integer(team), "number": 7])
            try tx.delete("teams", id: 10)
        }
        let request = try RequestBuilder.build(from: store, schema: TestSchema.schema)
        let changeSet = try #require(request.changeSets.first)
        #expect(changeSet.types == ["teams", "players"])
        #expect(changeSet.entities["teams"]?.create == [-1])
        #expect(changeSet.entities["teams"]?.delete == [10])
        #expect(changeSet.entities["teams"]?.attributes[10] == ["revision": 3])
        #expect(changeSet.entities["players"]?.attributes[-2]?["team_id"] == -1)
        #expect(changeSet.entities["players"]?.attributes[-2]?["user_id"] == .null)
    }

    @Test func theOperationLimitSendsFewerChangeSetsButAlwaysOne() throws {
        let store = try seededStore()
        try edit(store) { tx in for number in 1...3 { try tx.create("players", ["team_id": 10, "number": .integer(Int64(number))]) } }
        try edit(store) { tx in try tx.update("teams", id: 10, ["city": "A"]) }
        try edit(store) { tx in for number in 4...7 { try tx.create("players", ["team_id": 10, "number": .integer(Int64(number))]) } }
        func seqs(limit: Int? = nil, maxOperations: Int) throws -> [Int64?] {
            try RequestBuilder.build(from: store, schema: TestSchema.schema, limit: limit, maxOperations: maxOperations).changeSets.map(\.seq)
        }
        #expect(try seqs(maxOperations: 4) == [1, 2])
        #expect(try seqs(maxOperations: 7) == [1, 2])
        #expect(try seqs(maxOperations: 8) == [1, 2, 3])
        #expect(try seqs(maxOperations: 2) == [1], "a change set over the limit is sent alone")
        #expect(try seqs(limit: 1, maxOperations: 100) == [1])
    }
}
