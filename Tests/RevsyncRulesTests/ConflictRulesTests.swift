import RevsyncRules
import RevsyncWire
import Testing

@Suite struct ConflictRulesTests {
    let device: Int64 = 1
    let other: Int64 = 2

    @Test func sameRevisionMayBeWritten() {
        let version = RecordVersion(revision: 10, writer: other, otherRevision: 4)
        #expect(ConflictRules.mayWrite(version, basis: 10, device: device))
    }

    @Test func olderBasisWithAForeignWriteSinceIsRefused() {
        let version = RecordVersion(revision: 10, writer: other, otherRevision: 4)
        #expect(!ConflictRules.mayWrite(version, basis: 7, device: device))
    }

    @Test func onlyOwnWritesSinceTheBasisMayBeWrittenOver() {
        // Someone else wrote at 5, the device saw it, then wrote at 8 and 10 unacknowledged.
        let version = RecordVersion(revision: 10, writer: device, otherRevision: 5)
        #expect(ConflictRules.mayWrite(version, basis: 5, device: device))
        #expect(ConflictRules.mayWrite(version, basis: 8, device: device))
    }

    @Test func ownWriteOnTopOfAnUnseenForeignWriteIsRefused() {
        // The device saw 5; another device wrote at 7; the device's own write at 10 does not hide 7.
        let version = RecordVersion(revision: 10, writer: device, otherRevision: 7)
        #expect(!ConflictRules.mayWrite(version, basis: 5, device: device))
        #expect(!ConflictRules.mayWrite(version, basis: 6, device: device))
        #expect(ConflictRules.mayWrite(version, basis: 7, device: device))
    }

    @Test func recordCreatedByTheDeviceMayBeWrittenFromBasisZero() {
        let version = RecordVersion.created(by: device, at: 12)
        #expect(version.otherRevision == 0)
        #expect(ConflictRules.mayWrite(version, basis: 0, device: device))
        #expect(!ConflictRules.mayWrite(version, basis: 0, device: other))
    }

    @Test func sameWriterKeepsTheLatestForeignRevision() {
        let version = RecordVersion(revision: 10, writer: device, otherRevision: 7).written(by: device, at: 15)
        #expect(version == RecordVersion(revision: 15, writer: device, otherRevision: 7))
    }

    @Test func newWriterMakesThePreviousRevisionTheForeignOne() {
        let version = RecordVersion(revision: 10, writer: other, otherRevision: 7).written(by: device, at: 15)
        #expect(version == RecordVersion(revision: 15, writer: device, otherRevision: 10))
    }

    @Test func historyOfAlternatingWritersDecidesLikeTheRule() {
        // other creates at 3, device edits at 5 (seen 3), other edits at 8 (seen 5), device edits at 9 (seen 8).
        var version = RecordVersion.created(by: other, at: 3)
        #expect(ConflictRules.mayWrite(version, basis: 3, device: device))
        version = version.written(by: device, at: 5)
        #expect(ConflictRules.mayWrite(version, basis: 5, device: other))
        version = version.written(by: other, at: 8)
        #expect(ConflictRules.mayWrite(version, basis: 8, device: device))
        version = version.written(by: device, at: 9)
        // The device may go on from 8 (only its own write since), but not from 5 (other's 8 unseen).
        #expect(ConflictRules.mayWrite(version, basis: 8, device: device))
        #expect(!ConflictRules.mayWrite(version, basis: 5, device: device))
        // The other device saw 8; the device's write at 9 is new to it.
        #expect(!ConflictRules.mayWrite(version, basis: 8, device: other))
    }

    @Test func missingRecordIsNotFound() {
        let reason = ConflictRules.check(RecordKey("notes", 4), basis: 3, version: nil, device: device, operation: "update")
        #expect(reason?.code == .notFound)
        #expect(reason?.entity == "notes")
        #expect(reason?.id == 4)
    }

    @Test func staleBasisIsStaleRevisionNamingBothRevisions() throws {
        let version = RecordVersion(revision: 12, writer: other, otherRevision: 0)
        let reason = try #require(ConflictRules.check(RecordKey("notes", 4), basis: 9, version: version, device: device, operation: "delete"))
        #expect(reason.code == .staleRevision)
        #expect(reason.entity == "notes")
        #expect(reason.id == 4)
        #expect(reason.message.contains("12"))
        #expect(reason.message.contains("9"))
    }

    @Test func permittedWriteHasNoConflict() {
        let version = RecordVersion(revision: 12, writer: other, otherRevision: 0)
        #expect(ConflictRules.check(RecordKey("notes", 4), basis: 12, version: version, device: device, operation: "update") == nil)
    }
}

@Suite struct DatabaseConstraintTests {
    @Test func constraintsTheDatabaseEnforcedBecomeRejections() {
        #expect(ConflictRules.enforcedByDatabase(sqlState: "23503", table: "notes", detail: "Key (player_id)=(9) is not present", message: nil)?.code == .reference)
        #expect(ConflictRules.enforcedByDatabase(sqlState: "23505", table: "users", detail: "Key (email)=(a) already exists", message: nil)?.code == .invalid)
        #expect(ConflictRules.enforcedByDatabase(sqlState: "22001", table: "users", detail: "", message: "value too long")?.message.contains("value too long") == true)
        #expect(ConflictRules.enforcedByDatabase(sqlState: "54000", table: "notes", detail: "", message: "index row size 6016 exceeds btree version 4 maximum 2704")?.code == .invalid)
        // A deadlock, a lost connection or a full disk rejects nothing: the request fails or runs again.
        #expect(ConflictRules.enforcedByDatabase(sqlState: "40P01", table: nil, detail: "", message: nil) == nil)
        #expect(ConflictRules.enforcedByDatabase(sqlState: "08006", table: nil, detail: "", message: nil) == nil)
        #expect(ConflictRules.enforcedByDatabase(sqlState: "53100", table: nil, detail: "", message: nil) == nil)
    }
}
