import Foundation
import RevsyncDevice
import RevsyncLink
import RevsyncWire
import Testing

@testable import RevsyncSim

/// The verdict's pure parts: canonical records, digests, the first difference, the checks.
@Suite struct VerdictTests {
    static let attributes = [
        AttributeDescription(name: "name", type: .string, nullable: false),
        AttributeDescription(name: "score", type: .double, nullable: true),
        AttributeDescription(name: "count", type: .integer, nullable: true),
        AttributeDescription(name: "at", type: .timestamp, nullable: true),
        AttributeDescription(name: "done", type: .boolean, nullable: true),
    ]

    static func record(_ id: Int64, revision: Int64 = 3, _ values: Attributes = [:]) -> DeviceRecord {
        var attributes: Attributes = ["name": .string("n\(id)"), "score": .double(1.5), "count": 2, "at": "2024-05-01 08:00:00+00", "done": false]
        attributes.merge(values) { $1 }
        return DeviceRecord(id: id, revision: revision, attributes: attributes)
    }

    static func text(_ record: DeviceRecord) -> String { CanonicalRecord.text(of: record, attributes: attributes) }

    // MARK: Canonical form

    @Test func canonicalTextListsIdRevisionAndEveryAttributeInSchemaOrder() {
        let text = Self.text(DeviceRecord(id: 7, revision: 12, attributes: ["done": true, "name": "Owls \"Ω\"", "extra": 1]))
        #expect(text == #"{"id":7,"revision":12,"name":"Owls \"Ω\"","score":null,"count":null,"at":null,"done":true}"#)
    }

    @Test func anIntegralDoubleReceivedOverJSONHasTheSameCanonicalFormAsTheDoubleReadFromPostgreSQL() throws {
        // The server writes 2.0 as `2` (JSONWriter), which a device decodes as an integer.
        var out = JSONWriter()
        out.value(.double(2))
        let received = try JSONDecoder().decode(JSONValue.self, from: Data(out.bytes))
        #expect(received == .integer(2))
        #expect(Self.text(Self.record(1, ["score": received])) == Self.text(Self.record(1, ["score": .double(2)])))
        #expect(Self.text(Self.record(1, ["score": .integer(1)])) == Self.text(Self.record(1, ["score": .double(1)])))
        // Every digit of a double survives the JSON round trip.
        var precise = JSONWriter()
        precise.value(.double(0.1 + 0.2))
        let back = try JSONDecoder().decode(JSONValue.self, from: Data(precise.bytes))
        #expect(Self.text(Self.record(1, ["score": back])) == Self.text(Self.record(1, ["score": .double(0.1 + 0.2)])))
        #expect(Self.text(Self.record(1, ["score": .double(0.3)])) != Self.text(Self.record(1, ["score": .double(0.1 + 0.2)])))
    }

    @Test func equalValuesOfEveryTypeHaveOneCanonicalForm() {
        #expect(Self.text(Self.record(1, ["count": .double(3)])) == Self.text(Self.record(1, ["count": 3])))
        #expect(Self.text(Self.record(1, ["at": "2024-05-01T10:00:00+02:00"])) == Self.text(Self.record(1, ["at": "2024-05-01 08:00:00+00"])))
        #expect(Self.text(Self.record(1, ["at": "2014-02-01 13:15:23.487000+01"])) == Self.text(Self.record(1, ["at": "2014-02-01 12:15:23.487+00"])))
        #expect(Self.text(DeviceRecord(id: 1, revision: 1, attributes: ["name": "x"])) == Self.text(
            DeviceRecord(id: 1, revision: 1, attributes: ["name": "x", "score": nil, "count": nil, "at": nil, "done": .unsupported])))
        #expect(Self.text(Self.record(1, ["score": .double(-0.0)])) == Self.text(Self.record(1, ["score": .double(0)])))
    }

    // MARK: Digests

    @Test func theDigestIgnoresTheOrderOfTheListAndCountsTheRecords() {
        let records = (1...5).map { Self.record(Int64($0)) }
        let digest = EntityDigest(entity: "things", attributes: Self.attributes, records: records)
        #expect(digest.count == 5)
        #expect(digest.sha256.count == 64)
        #expect(EntityDigest(entity: "things", attributes: Self.attributes, records: records.reversed()) == digest)
        var streamed = EntityDigester(entity: "things", attributes: Self.attributes)
        for record in records { streamed.add(record) }
        #expect(streamed.finish() == digest)
    }

    @Test func theDigestChangesWithAnyChangeOfAnyRecord() {
        let records = (1...3).map { Self.record(Int64($0)) }
        let base = EntityDigest(entity: "things", attributes: Self.attributes, records: records)
        var changes: [[DeviceRecord]] = [
            Array(records.dropLast()),
            records + [Self.record(4)],
            [Self.record(1), Self.record(2), Self.record(5)],
        ]
        let variants: [Attributes] = [["name": "other"], ["score": .double(1.5000000000000002)], ["count": 3], ["at": "2024-05-01 08:00:00.000001+00"], ["done": true], ["done": nil]]
        for values in variants { changes.append([Self.record(1), Self.record(2, values), Self.record(3)]) }
        changes.append([Self.record(1), Self.record(2, revision: 4), Self.record(3)])
        for changed in changes {
            #expect(EntityDigest(entity: "things", attributes: Self.attributes, records: changed) != base, "\(changed.map(Self.text))")
        }
    }

    // MARK: First difference

    @Test func theFirstDifferingRecordIsNamedWithBothSides() throws {
        let postgres = (1...4).map { Self.record(Int64($0)) }
        var device = postgres
        device[2] = Self.record(3, revision: 9, ["name": "changed"])
        device[3] = Self.record(4, ["count": 40])
        let text = try #require(
            RecordDifference.first(entity: "things", attributes: Self.attributes, left: device, named: "device", right: postgres, named: "PostgreSQL"))
        #expect(text.hasPrefix("things 3 differs in revision, name: device {\"id\":3,\"revision\":9,\"name\":\"changed\""))
        #expect(text.contains("; PostgreSQL {\"id\":3,\"revision\":3,\"name\":\"n3\""))
        #expect(RecordDifference.first(entity: "things", attributes: Self.attributes, left: postgres, named: "a", right: postgres.reversed(), named: "b") == nil)
    }

    @Test func aRecordMissingOnEitherSideIsTheDifference() {
        let all = (1...3).map { Self.record(Int64($0)) }
        let withoutTwo = [all[0], all[2]]
        func first(_ left: [DeviceRecord], _ right: [DeviceRecord]) -> String? {
            RecordDifference.first(entity: "things", attributes: Self.attributes, left: left, named: "device", right: right, named: "PostgreSQL")
        }
        #expect(first(withoutTwo, all)?.hasPrefix("things 2 is missing on device; PostgreSQL {\"id\":2,") == true)
        #expect(first(all, withoutTwo)?.hasPrefix("things 2 is missing on PostgreSQL; device {\"id\":2,") == true)
        #expect(first(Array(all.prefix(2)), all)?.hasPrefix("things 3 is missing on device") == true)
        #expect(first([], all)?.hasPrefix("things 1 is missing on device") == true)
        #expect(first([Self.record(-1)] + all, all)?.hasPrefix("things -1 is missing on PostgreSQL") == true)
    }

    // MARK: Checks

    @Test func devicesEqualPassesOnEqualDigestsAndNamesTheFirstMismatch() {
        let truth = [
            EntityDigest(entity: "a", attributes: Self.attributes, records: [Self.record(1)]),
            EntityDigest(entity: "b", attributes: Self.attributes, records: [Self.record(1), Self.record(2)]),
        ]
        let same = Dictionary(uniqueKeysWithValues: truth.map { ($0.entity, $0) })
        #expect(DigestMismatch.between(device: "d1", digests: same, postgres: truth).isEmpty)
        let pass = VerdictChecks.devicesEqual(DeviceComparison(devices: 2, postgres: truth, mismatches: []))
        #expect(pass == VerdictCheck(name: "devices equal PostgreSQL", passed: true, detail: "2 devices equal to PostgreSQL (2 entities, 3 records)"))

        var other = same
        other["b"] = EntityDigest(entity: "b", attributes: Self.attributes, records: [Self.record(1)])
        other["a"] = nil
        let mismatches = DigestMismatch.between(device: "d2", digests: other, postgres: truth)
        #expect(mismatches.map(\.entity) == ["a", "b"])
        #expect(mismatches[0].deviceDigest == nil)
        let fail = VerdictChecks.devicesEqual(
            DeviceComparison(devices: 2, postgres: truth, mismatches: Array(mismatches.suffix(1)), firstDifference: "b 2 is missing on device"))
        #expect(!fail.passed)
        #expect(fail.detail == "1 of 2 devices differ (1 entity digests); first: device d2, b: 1 records vs PostgreSQL's 2; b 2 is missing on device")
        let unreadable = DigestMismatch(device: "d3", entity: "a", deviceDigest: nil, postgresDigest: truth[0], error: "unknown entity a")
        #expect(VerdictChecks.devicesEqual(DeviceComparison(devices: 3, postgres: truth, mismatches: [unreadable])).detail
            == "1 of 3 devices differ (1 entity digests); first: device d3, a: unreadable (unknown entity a)")
    }

    @Test func lostChangeSetsAreAcknowledgedPairsMissingFromTheLog() {
        let acknowledged: Set = [ChangeSetRef(device: "D1", seq: 1), ChangeSetRef(device: "d1", seq: 2), ChangeSetRef(device: "d2", seq: 1)]
        let logged: Set = [ChangeSetRef(device: "d1", seq: 1), ChangeSetRef(device: "d1", seq: 2), ChangeSetRef(device: "d2", seq: 1), ChangeSetRef(device: "d3", seq: 1)]
        #expect(VerdictChecks.lostChangeSets(acknowledged: acknowledged, committed: logged) == VerdictCheck(
            name: "lost change sets", passed: true, detail: "lost 0 of 3 acknowledged"))
        let fail = VerdictChecks.lostChangeSets(acknowledged: acknowledged, committed: [ChangeSetRef(device: "d1", seq: 1)])
        #expect(!fail.passed)
        #expect(fail.detail == "lost 2 of 3 acknowledged: device d1 seq 2; device d2 seq 1")
    }

    @Test func duplicateRecordsFailOnATemporaryIdWithTwoRecordsOrAChangeSetCommittedTwice() {
        #expect(VerdictChecks.duplicateRecords([]) == VerdictCheck(name: "duplicate records", passed: true, detail: "0 duplicates"))
        let duplicate = DuplicateTemporaryId(device: "d1", entity: "screens", temporaryId: -4, ids: [10, 11], revisions: [5, 8])
        let fail = VerdictChecks.duplicateRecords([duplicate])
        #expect(!fail.passed)
        #expect(fail.detail == "1 temporary ids made more than one record: device d1 screens -4 became ids 10, 11 at revisions 5, 8")
        let repeated = VerdictChecks.duplicateRecords([], repeated: [ChangeSetRef(device: "d1", seq: 3)])
        #expect(!repeated.passed && repeated.detail == "1 change sets committed more than once: device d1 seq 3")
        let many = VerdictChecks.duplicateRecords((1...5).map { DuplicateTemporaryId(device: "d", entity: "e", temporaryId: -$0, ids: [1, 2], revisions: [1, 2]) })
        #expect(many.detail.hasPrefix("5 temporary ids") && many.detail.hasSuffix("; … 2 more"))
    }

    @Test func theGapFreeCheckReportsTheFirstMissingRevision() {
        #expect(VerdictChecks.gapFreeLog(LogGaps(head: 9, horizon: 0, missing: 0, firstMissing: nil, outOfRange: 0)) == VerdictCheck(
            name: "gap-free log", passed: true, detail: "revisions 1…9 present once each"))
        #expect(VerdictChecks.gapFreeLog(LogGaps(head: 0, horizon: 0, missing: 0, firstMissing: nil, outOfRange: 0)).passed)
        let gap = VerdictChecks.gapFreeLog(LogGaps(head: 9, horizon: 3, missing: 2, firstMissing: 5, outOfRange: 0))
        #expect(!gap.passed && gap.detail == "revisions 4…9: first missing revision 5 (2 missing)")
        let extra = VerdictChecks.gapFreeLog(LogGaps(head: 9, horizon: 0, missing: 0, firstMissing: nil, outOfRange: 1))
        #expect(!extra.passed && extra.detail == "revisions 1…9: 1 entries outside the range")
    }

    @Test func regressionsFailTheRevisionCheck() {
        #expect(VerdictChecks.revisionRegressions([]) == VerdictCheck(name: "revision regressions", passed: true, detail: "0 regressions"))
        let fail = VerdictChecks.revisionRegressions([RevisionRegression(device: "d1", from: 120, to: 80)])
        #expect(!fail.passed && fail.detail == "1 regressions: device d1 120 → 80")
    }

    @Test func aRejectionNotDeliveredToItsDeviceIsAViolation() {
        let rejections = [
            ServerRejection(changeSet: ChangeSetRef(device: "d1", seq: 2), code: "stale_revision"),
            ServerRejection(changeSet: ChangeSetRef(device: "d2", seq: 1), code: "not_found"),
        ]
        let delivered: Set = [ChangeSetRef(device: "d1", seq: 2), ChangeSetRef(device: "d2", seq: 1), ChangeSetRef(device: "d2", seq: 9)]
        #expect(VerdictChecks.rejectionsDelivered(rejections, delivered: delivered) == VerdictCheck(
            name: "rejections delivered", passed: true, detail: "2 of 2 rejections delivered"))
        let fail = VerdictChecks.rejectionsDelivered(rejections, delivered: [ChangeSetRef(device: "d1", seq: 2), ChangeSetRef(device: "d1", seq: 1)])
        #expect(!fail.passed && fail.detail == "1 of 2 rejections delivered; not delivered: device d2 seq 1 (not_found)")
    }

    @Test func livenessFailsForADeviceWithPendingChangeSetsOrBehindTheHead() {
        #expect(DeviceLag.of(device: "d", pendingChangeSets: 0, maxRevision: 10, head: 10) == nil)
        let pending = DeviceLag.of(device: "d1", pendingChangeSets: 2, maxRevision: 10, head: 10)
        let behind = DeviceLag.of(device: "d2", pendingChangeSets: 0, maxRevision: 9, head: 10)
        #expect(pending != nil && behind != nil)
        #expect(VerdictChecks.liveness([], devices: 3, head: 10) == VerdictCheck(
            name: "liveness", passed: true, detail: "3 of 3 devices at head 10 with nothing pending"))
        let fail = VerdictChecks.liveness([pending, behind].compactMap { $0 }, devices: 3, head: 10)
        #expect(!fail.passed)
        #expect(fail.detail == "1 of 3 devices at head 10 with nothing pending; behind: device d1 (2 pending, at revision 10); device d2 (0 pending, at revision 9)")
    }

    @Test func redisPartitionsHoldOnlyWhenEveryCutInstanceSubscribedAnew() {
        let recovered = [
            PartitionRecovery(instance: 0, cut: .drop, secondsAfterHeal: 0.4),
            PartitionRecovery(instance: 2, cut: .silent, secondsAfterHeal: 1.26),
        ]
        #expect(VerdictChecks.redisPartitions(recovered) == VerdictCheck(
            name: VerdictChecks.Name.redisPartitions, passed: true,
            detail: "2 cuts (1 drop, 1 silent): each instance subscribed to Redis anew, at most 1.3 s after the heal"))
        let stuck = VerdictChecks.redisPartitions(recovered + [PartitionRecovery(instance: 1, cut: .drop, secondsAfterHeal: nil)])
        #expect(!stuck.passed)
        #expect(stuck.detail == "1 of 3 instances cut from Redis had no subscription made after the cut 15 s after the heal: instance 1 (drop)")
        #expect(!VerdictChecks.redisPartitions([]).passed)
        let restarted = PartitionRecovery(instance: 1, cut: .reset, secondsAfterHeal: nil, restarted: true)
        #expect(VerdictChecks.redisPartitions(recovered + [restarted]).detail
            == "2 cuts (1 drop, 1 silent): each instance subscribed to Redis anew, at most 1.3 s after the heal; "
            + "1 not judged (the instance was restarted after the cut began)")
        #expect(!VerdictChecks.redisPartitions([restarted]).passed, "no cut judged")
    }

    @Test func servedWhileRefusedHoldsOnlyWhenEveryProbeWasAnswered200() {
        let served = ReadinessAnswer(status: 200, seconds: 0.7, error: nil)
        #expect(VerdictChecks.servedWhileRefused([served, served]) == VerdictCheck(
            name: "served while PostgreSQL refused", passed: true,
            detail: "2 of 2 probes of /ready answered 200 while PostgreSQL refused the servers more connections, the slowest in 0.70 s"))
        let unavailable = ReadinessAnswer(status: 503, seconds: 10.02, error: nil)
        let lost = ReadinessAnswer(status: nil, seconds: 15, error: "deadline exceeded")
        let fail = VerdictChecks.servedWhileRefused([served, unavailable, lost])
        #expect(!fail.passed)
        #expect(fail.detail.hasSuffix("; not served: 503 after 10.02 s; deadline exceeded after 15.00 s"))
        // A refusal that never happened proves nothing.
        #expect(!VerdictChecks.servedWhileRefused([]).passed)
    }

    @Test func frozenPostgresHoldsOnlyWhenEveryProbeWasAnsweredBeforeTheThaw() {
        let givenUp = ReadinessAnswer(status: 503, seconds: 30.02, error: nil, body: #"{"error":"unavailable","message":"PostgreSQL did not answer within 30.0 seconds: is it frozen, or its storage stalled?"}"#)
        let waited = ReadinessAnswer(status: 503, seconds: 10.01, error: nil, body: #"{"error":"unavailable","message":"no PostgreSQL connection became free within 10.0 seconds"}"#)
        let answered = FrozenPostgres(frozenFor: 35.1, probes: [
            .init(instance: 0, sentAfter: 0.01, answer: givenUp), .init(instance: 1, sentAfter: 1.0, answer: waited),
        ])
        #expect(VerdictChecks.frozenPostgres([answered]) == VerdictCheck(
            name: "answered while PostgreSQL was frozen", passed: true,
            detail: "1 freeze of at least 35 s: all 2 GET /ready answered before PostgreSQL continued (1 connection given up, 1 no connection free), "
                + "the slowest after 30.0 s"))
        // Answered only once PostgreSQL continued: the request waited for as long as the freeze.
        let late = FrozenPostgres(frozenFor: 35.1, probes: answered.probes + [
            .init(instance: 2, sentAfter: 0.02, answer: ReadinessAnswer(status: 200, seconds: 35.2, error: nil, body: #"{"status":"ready"}"#)),
            .init(instance: 2, sentAfter: 1.0, answer: ReadinessAnswer(status: nil, seconds: 65, error: "deadline exceeded")),
        ])
        let fail = VerdictChecks.frozenPostgres([late])
        #expect(!fail.passed)
        #expect(fail.detail == "2 of 4 GET /ready were not answered while PostgreSQL was frozen: instance 2, asked 0.0 s into the freeze: "
            + "answered 200 after 35.2 s; instance 2, asked 1.0 s into the freeze: no answer")
        #expect(!VerdictChecks.frozenPostgres([]).passed, "no freeze proves nothing")
        #expect(!VerdictChecks.frozenPostgres([FrozenPostgres(frozenFor: 35, probes: [])]).passed)
    }
}
