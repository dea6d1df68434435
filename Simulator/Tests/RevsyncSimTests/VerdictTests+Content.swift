import RevsyncRules
import RevsyncWire
import Testing

@testable import RevsyncSim

/// "acknowledged content": the log entry at an acknowledged revision must hold what the device sent.
extension VerdictTests {
    static let schema = DatasetSchema(version: 1, roles: ["admin"], entities: [
        Entity(name: "teams", attributes: [AttributeDescription(name: "name", type: .string, nullable: false)], permissionsByRole: [:]),
        Entity(name: "screens", attributes: [
            AttributeDescription(name: "team_id", type: .integer, nullable: false, references: "teams", onDelete: .cascade),
            AttributeDescription(name: "name", type: .string, nullable: false),
            AttributeDescription(name: "sort_order", type: .integer, nullable: true),
        ], permissionsByRole: [:]),
        Entity(name: "notes", attributes: [
            AttributeDescription(name: "screen_id", type: .integer, nullable: true, references: "screens", onDelete: .setNull),
            AttributeDescription(name: "body", type: .string, nullable: false),
            AttributeDescription(name: "score", type: .double, nullable: true),
            AttributeDescription(name: "at", type: .timestamp, nullable: true),
        ], permissionsByRole: [:]),
    ])

    /// Seq 4 of device d1: a screen and a note on it (temporary ids), an update of a note
    /// created earlier (-5, mapped to 77 by now), a delete of team 9.
    static var sentTree: ChangeSet {
        var set = ChangeSet(seq: 4)
        set["screens"].create = [-10]
        set["screens"].attributes[-10] = ["team_id": 7, "name": "Screen blue 12", "sort_order": 2]
        set["notes"].create = [-11]
        set["notes"].attributes[-11] = ["screen_id": -10, "body": "Note", "score": 2, "at": "2026-11-22T10:00:00+01:00"]
        set["notes"].update = [-5]
        set["notes"].attributes[-5] = ["revision": 0, "body": "edited"]
        set["teams"].delete = [9]
        return set
    }

    /// The author form the server wrote for `sentTree` at revision 120, with the cascade of team 9's delete.
    static var loggedTree: ChangeSet {
        var set = ChangeSet(seq: 4, conflict: false, revision: 120)
        set["screens"].create = [501]
        set["screens"].attributes[501] = ["__oldId__": -10, "revision": 120, "team_id": 7, "name": "Screen blue 12", "sort_order": 2]
        set["notes"].create = [502]
        set["notes"].attributes[502] = [
            "__oldId__": -11, "revision": 120, "screen_id": 501, "body": "Note", "score": .double(2), "at": "2026-11-22 09:00:00+00",
        ]
        set["notes"].update = [77, 80]
        set["notes"].attributes[77] = ["revision": 120, "body": "edited"]
        set["notes"].attributes[80] = ["revision": 120, "screen_id": nil]
        set["teams"].delete = [9]
        set["screens"].delete = [300]
        return set
    }

    static func audit(_ sent: ChangeSet, seq: Int64 = 4, revision: Int64 = 120, entry: LoggedChangeSet?, horizon: Int64 = 0) -> ContentAudit {
        var audit = ContentAudit()
        audit.check(
            AcknowledgedChangeSet(device: "D1", seq: seq, revision: revision, sent: sent), entry: entry, horizon: horizon,
            temporaryIds: [-5: 77, -10: 501, -11: 502], schema: schema)
        return audit
    }

    @Test func anEntryHoldingWhatTheDeviceSentPassesWhateverIdsAndValueFormsItUses() {
        let entry = LoggedChangeSet(revision: 120, device: "d1", seq: 4, authorBody: Self.loggedTree)
        let audit = Self.audit(Self.sentTree, entry: entry)
        #expect(audit.mismatches.isEmpty, "\(audit.mismatches)")
        #expect(VerdictChecks.acknowledgedContent(audit) == VerdictCheck(
            name: "acknowledged content", passed: true, detail: "1 of 1 acknowledged change sets hold what their device sent"))

        // Sent again after the acknowledgement of -5 arrived: the permanent id, the same content.
        var rewritten = Self.sentTree
        rewritten["notes"].update = [77]
        let values = rewritten["notes"].attributes.removeValue(forKey: -5)
        rewritten["notes"].attributes[77] = values
        #expect(Self.audit(rewritten, entry: entry).mismatches.isEmpty)

        // A pruned entry cannot be compared, and is said so.
        let pruned = Self.audit(Self.sentTree, revision: 90, entry: nil, horizon: 100)
        #expect(VerdictChecks.acknowledgedContent(pruned).detail == "0 of 0 acknowledged change sets hold what their device sent (1 pruned, not compared)")
        #expect(VerdictChecks.acknowledgedContent(pruned).passed)
    }

    /// A restored device that had not learnt the server's counters took a new edit's seq for
    /// acknowledged when the catch-up brought the lost copy's change set under it: the edit was
    /// never sent, so no answer to it can be compared, and the check says so.
    @Test func aSeqTakenAsAcknowledgedWithoutBeingSentFailsTheContentCheck() {
        let entry = LoggedChangeSet(revision: 120, device: "d1", seq: 4, authorBody: Self.loggedTree)
        var audit = Self.audit(Self.sentTree, entry: entry)
        let sent = [AcknowledgedChangeSet(device: "d1", seq: 4, revision: 120, sent: Self.sentTree)]
        audit.checkSent(acknowledged: [ChangeSetRef(device: "D1", seq: 4)], sent: sent)
        #expect(audit.unsent.isEmpty)
        #expect(VerdictChecks.acknowledgedContent(audit).passed)

        audit.checkSent(acknowledged: [ChangeSetRef(device: "d1", seq: 4), ChangeSetRef(device: "d1", seq: 5)], sent: sent)
        let check = VerdictChecks.acknowledgedContent(audit)
        #expect(!check.passed)
        #expect(check.detail == "1 of 1 acknowledged change sets hold what their device sent; "
            + "taken as acknowledged but never sent and acknowledged: device d1 seq 5")
    }

    /// The author's form (its seq, its temporary ids) goes only to the device that made the
    /// change set: a waiter once got other devices' change sets so when a commit held a whole run.
    @Test func anotherDevicesChangeSetInTheAuthorsFormFailsTheContentCheck() {
        var audit = ContentAudit()
        let authors: [Int64: String] = [7: "d1", 8: "D2", 9: "d1"]
        // Revision 3 is pruned: the log cannot say, so nothing is claimed.
        audit.checkAuthorForms(received: ["D1": [3, 7, 9], "d2": [8]], authors: authors)
        #expect(audit.foreignAuthorForms.isEmpty)
        #expect(VerdictChecks.acknowledgedContent(audit).passed)

        audit.checkAuthorForms(received: ["d1": [7, 8, 9], "d3": [9]], authors: authors)
        #expect(audit.foreignAuthorForms == [
            ForeignAuthorForm(device: "d1", revision: 8, author: "d2"), ForeignAuthorForm(device: "d3", revision: 9, author: "d1"),
        ])
        let check = VerdictChecks.acknowledgedContent(audit)
        #expect(!check.passed)
        #expect(check.detail == "0 of 0 acknowledged change sets hold what their device sent; "
            + "another device's change set in the author's form: device d1 got revision 8, device d2's; device d3 got revision 9, device d1's")
    }

    /// Before the server refused reused seqs, a device restored from an older copy of its file
    /// sent a new edit under a seq it had already used, and the server answered with the outcome
    /// of the change set first sent under it: the new edit was acknowledged and never applied.
    @Test func aRestoredDevicesNewEditAcknowledgedWithTheOldOutcomeFailsTheContentCheck() throws {
        // The copy's counters are behind: its next edit reuses seq 4 and temporary id -10.
        var newEdit = ChangeSet(seq: 4)
        newEdit["notes"].create = [-10]
        newEdit["notes"].attributes[-10] = ["body": "written after the restore"]
        let oldOutcome = LoggedChangeSet(revision: 120, device: "d1", seq: 4, authorBody: Self.loggedTree)

        // Comparing (device, seq) pairs sees nothing wrong: seq 4 is in the log.
        let pair: Set = [ChangeSetRef(device: "d1", seq: 4)]
        #expect(VerdictChecks.lostChangeSets(acknowledged: pair, committed: pair).passed)

        let check = VerdictChecks.acknowledgedContent(Self.audit(newEdit, entry: oldOutcome))
        #expect(!check.passed)
        #expect(check.detail == "0 of 1 acknowledged change sets hold what their device sent; differ: device d1 seq 4 at revision 120: "
            + "notes: created temporary ids -10 but the entry created -11; "
            + "screens: the entry created 501, which the device did not send")
    }

    @Test func everyWayAnEntryCanDifferIsNamed() {
        let entry = LoggedChangeSet(revision: 120, device: "d1", seq: 4, authorBody: Self.loggedTree)
        func problem(_ sent: ChangeSet, _ entry: LoggedChangeSet?) -> String? { Self.audit(sent, entry: entry).mismatches.first?.problem }

        #expect(problem(Self.sentTree, nil) == "no log entry at revision 120")
        #expect(problem(Self.sentTree, LoggedChangeSet(revision: 120, device: "d2", seq: 4, authorBody: Self.loggedTree))
            == "the log entry is device d2's (seq 4)")
        #expect(problem(Self.sentTree, LoggedChangeSet(revision: 120, device: "d1", seq: 3, authorBody: Self.loggedTree))
            == "the log entry has seq 3")

        var renamed = Self.sentTree
        renamed["screens"].attributes[-10]?["name"] = "Screen late 7"
        #expect(problem(renamed, entry) == #"screens 501 (-10) name: sent "Screen late 7", the entry has "Screen blue 12""#)

        var otherParent = Self.sentTree
        otherParent["notes"].attributes[-11]?["screen_id"] = 299
        #expect(problem(otherParent, entry) == "notes 502 (-11) screen_id: sent 299, the entry has 501")

        var moreUpdates = Self.sentTree
        moreUpdates["notes"].update.append(81)
        moreUpdates["notes"].attributes[81] = ["revision": 3, "body": "x"]
        moreUpdates["teams"].delete.append(-99)
        #expect(problem(moreUpdates, entry)
            == "notes 81: updated by the device, not in the entry's updates; teams: deleted temporary id -99, which the server never mapped")

        var updatedValue = Self.sentTree
        updatedValue["notes"].attributes[-5]?["body"] = "edited twice"
        #expect(problem(updatedValue, entry) == #"notes 77 (-5) body: sent "edited twice", the entry has "edited""#)
    }
}
