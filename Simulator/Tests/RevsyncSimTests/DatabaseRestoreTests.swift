import RevsyncWire
import Testing
@testable import RevsyncSim

/// The soak's database restore: what it reads from the dump, what it sets apart, and its check.
@Suite struct DatabaseRestoreTests {
    @Test func theHeadRowIsReadFromTheDumpsCopyBlock() throws {
        let sql = """
            SET statement_timeout = 0;

            COPY public.revsync_head (singleton, head, instance, history) FROM stdin;
            t\t4211\t0b4f0c3e-5a7e-4d0e-9a51-4a0b1c2d3e4f\t9e2d1c0b-aaaa-4bbb-8ccc-123456789abc
            \\.
            """
        let (head, history) = try DatabaseBackup.headRow(in: sql)
        #expect(head == 4211)
        #expect(history == "9e2d1c0b-aaaa-4bbb-8ccc-123456789abc")
        #expect(throws: FleetError.self) { try DatabaseBackup.headRow(in: "COPY public.revsync_log (revision) FROM stdin;\n1\n") }
    }

    @Test func onlyRevisionsAboveTheRestorePointOfTheOldIdAreSetApart() {
        let point = RestorePoint(head: 100, history: "old")
        #expect(point.tookAway(revision: 101, history: "old"))
        #expect(!point.tookAway(revision: 100, history: "old"))
        #expect(!point.tookAway(revision: 101, history: "new"))
        #expect(!point.tookAway(revision: 101, history: nil))

        let ledger = AcknowledgementLedger()
        let one = ChangeSet(seq: 1, types: ["notes"], entities: ["notes": EntityChanges(create: [-1], attributes: [-1: ["body": "a"]])])
        let two = ChangeSet(seq: 2, types: ["notes"], entities: ["notes": EntityChanges(create: [-2], attributes: [-2: ["body": "b"]])])
        let again = ChangeSet(seq: 2, types: ["notes"], entities: ["notes": EntityChanges(create: [-3], attributes: [-3: ["body": "c"]])])
        func ack(_ seq: Int64, _ revision: Int64) -> ChangeSet { ChangeSet(seq: seq, conflict: false, revision: revision) }
        ledger.record(SyncRequest(maxRevision: 0, changeSets: [one]), SyncResponse(maxRevision: 99, changeSets: [ack(1, 99)], history: "old"))
        ledger.record(SyncRequest(maxRevision: 99, changeSets: [two]), SyncResponse(maxRevision: 102, changeSets: [ack(2, 102)], history: "old"))
        // After the restore the seq is given again (renumbered) and committed in the new line.
        ledger.record(SyncRequest(maxRevision: 100, changeSets: [again]), SyncResponse(maxRevision: 101, changeSets: [ack(2, 101)], history: "new"))
        let split = ledger.acknowledged(by: "d", besides: point)
        #expect(split.kept.map(\.revision) == [99, 101])
        #expect(split.lost.map(\.revision) == [102])
        #expect(ledger.acknowledged(by: "d").kept.count == 3)
        #expect(ledger.authorFormRevisions(besides: point) == [99, 101])
        #expect(ledger.authorFormRevisions() == [99, 101, 102])
    }

    /// The same backup put back again: what the first restore's renewed line committed above the
    /// backup's head is gone too, and the check wants an id that is neither.
    @Test func aSecondRestoreOfTheBackupTakesAwayTheRenewedLineToo() {
        var point = RestorePoint(head: 100, history: "old")
        point.histories.insert("renewed")
        point.restores += 1
        #expect(point.tookAway(revision: 101, history: "renewed"))
        #expect(point.tookAway(revision: 101, history: "old"))
        #expect(!point.tookAway(revision: 100, history: "renewed"))
        #expect(!point.tookAway(revision: 101, history: "third"))
        let adopted = VerdictChecks.databaseRestore(point, current: "old", deviceHistories: ["old"], lostAcknowledgements: 0, regressions: 0)
        #expect(!adopted.passed && adopted.detail.contains("the backup's"))
        #expect(!VerdictChecks.databaseRestore(point, current: "renewed", deviceHistories: ["renewed"], lostAcknowledgements: 0, regressions: 0).passed)
        let passed = VerdictChecks.databaseRestore(point, current: "third", deviceHistories: ["third"], lostAcknowledgements: 0, regressions: 0)
        #expect(passed.passed && passed.detail.contains("2 times"))
    }

    @Test func theCheckWantsARenewedIdHeldByEveryDevice() {
        let point = RestorePoint(head: 100, history: "old")
        let passed = VerdictChecks.databaseRestore(point, current: "new", deviceHistories: ["new", "new"], lostAcknowledgements: 7, regressions: 3)
        #expect(passed.passed)
        #expect(passed.detail.contains("7 acknowledgements"))
        #expect(!VerdictChecks.databaseRestore(point, current: "old", deviceHistories: ["old"], lostAcknowledgements: 0, regressions: 0).passed)
        #expect(!VerdictChecks.databaseRestore(point, current: "new", deviceHistories: ["new", "old"], lostAcknowledgements: 0, regressions: 0).passed)
        #expect(!VerdictChecks.databaseRestore(nil, current: "new", deviceHistories: [], lostAcknowledgements: 0, regressions: 0).passed)
    }
}
