import Foundation
import RevsyncRules
import RevsyncWire
import Testing

/// The pure halves of the request limits: counting operations, and the re-bootstrap instruction.
@Suite struct LimitRulesTests {
    @Test func changeSetOverTheOperationLimitIsInvalid() throws {
        let schema = try Fixtures.defaultSchema()
        var set = ChangeSet(seq: 1)
        for id in 1...4 { set.create("notes", -Int64(id), ["body": "n", "pinned": false]) }
        let validator = ChangeSetValidator(schema: schema, role: "admin", maxOperations: 3)
        guard case .failure(let reason) = validator.validate(set) else {
            Issue.record("four operations passed a limit of three")
            return
        }
        #expect(reason.code == .invalid)
        #expect(reason.message.contains("the limit is 3"))
        #expect((try? ChangeSetValidator(schema: schema, role: "admin", maxOperations: 4).validate(set).get()) != nil)
    }

    @Test func resyncCorrectiveCarriesTheReasonAndNoRecords() throws {
        let reason = ConflictReason(code: .forbidden, entity: "screens", id: 7, message: "role \"member\" may not delete screens")
        let bytes = CorrectiveSet.resync(seq: 4, reason: reason, limit: 1024)
        let decoded = try JSONDecoder().decode(ChangeSet.self, from: Data(bytes))
        #expect(decoded.conflict == true)
        #expect(decoded.resync == true)
        #expect(decoded.seq == 4)
        #expect(decoded.types.isEmpty)
        #expect(decoded.reason?.code == .forbidden)
        #expect(decoded.reason?.id == 7)
        #expect(decoded.reason?.message.hasPrefix("role \"member\" may not delete screens; the repair is larger than 1024 bytes") == true)
    }

    @Test func approximateSizeGrowsWithTheRecordsKept() {
        var corrective = CorrectiveSet(seq: 1, reason: ConflictReason(code: .staleRevision, entity: nil, id: nil, message: "m"))
        let empty = corrective.approximateBytes
        corrective.keep("notes", StoredRecord(id: 1, revision: 2, values: ["body": .string(String(repeating: "x", count: 1000))]), temporaryId: nil)
        let encoded = corrective.encoded(schema: nil).count
        #expect(corrective.approximateBytes > empty + 1000)
        #expect(corrective.approximateBytes >= encoded - 64)
    }
}
