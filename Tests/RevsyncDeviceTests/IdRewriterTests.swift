import RevsyncWire
import Testing

@testable import RevsyncDevice

@Suite("Rewriting temporary ids")
struct IdRewriterTests {
    @Test func rewritesUpdateAndDeleteIdsTheirAttributeKeysAndReferences() {
        var changeSet = ChangeSet(seq: 4)
        changeSet.create("notes", -9, ["player_id": -5, "body": "x"])
        changeSet.update("players", -5, ["revision": 0, "team_id": -3, "user_id": -3])
        changeSet.delete("teams", -3, ["revision": 0])
        let map: [Int64: TemporaryIdMapping] = [
            -3: TemporaryIdMapping(entity: "teams", id: 30),
            -5: TemporaryIdMapping(entity: "players", id: 50),
            -9: TemporaryIdMapping(entity: "notes", id: 90),
        ]
        let rewritten = IdRewriter.rewrite(changeSet, schema: TestSchema.schema) { entity, id in
            map[id].flatMap { $0.entity == entity ? $0.id : nil }
        }
        #expect(rewritten.entities["notes"]?.create == [-9], "creates keep their temporary id")
        #expect(rewritten.entities["notes"]?.attributes[-9]?["player_id"] == 50)
        #expect(rewritten.entities["players"]?.update == [50])
        #expect(rewritten.entities["players"]?.attributes[50]?["team_id"] == 30)
        #expect(rewritten.entities["players"]?.attributes[50]?["user_id"] == -3, "-3 is a team, not a user")
        #expect(rewritten.entities["teams"]?.delete == [30])
        #expect(rewritten.entities["teams"]?.attributes[30] == ["revision": 0])
        #expect(rewritten.seq == 4)
        #expect(rewritten.types == changeSet.types)
    }

    @Test func collectsTheTemporaryIdsAMapMayResolve() {
        var changeSet = ChangeSet(seq: 1)
        changeSet.create("players", -2, ["team_id": -1, "number": -7])
        changeSet.update("teams", -4, ["revision": 0])
        #expect(IdRewriter.temporaryIdsToResolve(in: changeSet, schema: TestSchema.schema) == [-1, -4])
    }
}
