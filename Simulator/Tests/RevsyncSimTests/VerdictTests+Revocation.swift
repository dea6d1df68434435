import Testing

@testable import RevsyncSim

/// "revoked tokens", and what revoked devices change in the other checks.
extension VerdictTests {
    @Test func revokedTokensPassWhenEveryLaterRequestWasRefusedAndNothingWasCommitted() {
        #expect(VerdictChecks.revokedTokens(RevocationAudit(revoked: [], commitsAfter: []), devices: []) == VerdictCheck(
            name: "revoked tokens", passed: true, detail: "no device revoked"))
        #expect(VerdictChecks.revokedTokens(nil, devices: []).passed)
        let device = RevokedDevice(device: "D1", accepted: 0, refused: 12, other: 3, acceptedWithinBound: 1)
        #expect(VerdictChecks.revokedTokens(RevocationAudit(revoked: ["D1"], commitsAfter: []), devices: [device]) == VerdictCheck(
            name: "revoked tokens", passed: true,
            detail: "1 revoked devices: 12 requests refused with 401, 3 unanswered or other errors, none accepted "
                + "(1 accepted within 1 s of the revocation); nothing committed since (1 revoked in PostgreSQL)"))
    }

    @Test func aCommitAfterTheRevocationOrAnAcceptedRequestFailsRevokedTokens() {
        let refused = RevokedDevice(device: "d1", accepted: 0, refused: 5, other: 0)
        let committed = VerdictChecks.revokedTokens(
            RevocationAudit(revoked: ["d1"], commitsAfter: [
                CommitAfterRevocation(device: "d1", revokedAt: "2026-01-01 10:00:00.5+00", entries: 2, firstRevision: 130),
            ]), devices: [refused])
        #expect(!committed.passed)
        #expect(committed.detail == "1 revoked devices have change sets committed since: "
            + "device d1 revoked at 2026-01-01 10:00:00.5+00: 2 log entries committed since, first at revision 130")

        let accepting = RevokedDevice(device: "d1", accepted: 1, refused: 5, other: 0, firstAccepted: "/sync answered 200, sent 2.5 s after the revocation")
        let accepted = VerdictChecks.revokedTokens(RevocationAudit(revoked: ["d1"], commitsAfter: []), devices: [accepting])
        #expect(!accepted.passed)
        #expect(accepted.detail == "1 revoked devices got 2xx answers: device d1: 1 accepted, 5 refused "
            + "(first: /sync answered 200, sent 2.5 s after the revocation)")

        let forgotten = VerdictChecks.revokedTokens(RevocationAudit(revoked: [], commitsAfter: []), devices: [refused])
        #expect(!forgotten.passed && forgotten.detail == "1 revoked devices not revoked in PostgreSQL: d1")

        let old = VerdictChecks.revokedTokens(nil, devices: [refused])
        #expect(!old.passed && old.detail == "revsync_devices has no revoked_at column: what was committed after a revocation cannot be told")
    }

    @Test func revokedDevicesAreLeftOutOfTheComparisonAndTheirUnansweredRejectionsExcused() {
        let truth = [EntityDigest(entity: "a", attributes: Self.attributes, records: [Self.record(1)])]
        #expect(VerdictChecks.devicesEqual(DeviceComparison(devices: 2, postgres: truth, mismatches: [], notCompared: 1)).detail
            == "2 devices equal to PostgreSQL (1 entities, 1 records); 1 revoked devices not compared")

        let rejections = [
            ServerRejection(changeSet: ChangeSetRef(device: "d1", seq: 2), code: "stale_revision"),
            ServerRejection(changeSet: ChangeSetRef(device: "d2", seq: 7), code: "forbidden"),
        ]
        let delivered: Set = [ChangeSetRef(device: "d1", seq: 2)]
        let excused: Set = [ChangeSetRef(device: "d2", seq: 7)]
        #expect(VerdictChecks.rejectionsDelivered(rejections, delivered: delivered, excused: excused) == VerdictCheck(
            name: "rejections delivered", passed: true,
            detail: "1 of 2 rejections delivered, 1 excused (pending on revoked devices or lost with a restore)"))
        #expect(!VerdictChecks.rejectionsDelivered(rejections, delivered: delivered).passed)
    }

    @Test func rotatedTokensPassOnlyWhenEveryOldTokenWasRefused() {
        #expect(!VerdictChecks.rotatedTokens([]).passed, "the rotation did not happen")
        let refused = RevokedDevice(device: "d1", accepted: 0, refused: 3, other: 1)
        let check = VerdictChecks.rotatedTokens([refused])
        #expect(check.passed)
        #expect(check.detail.contains("3 requests with the old token refused with 401"))
        let accepted = VerdictChecks.rotatedTokens([refused, RevokedDevice(device: "d2", accepted: 1, refused: 0, other: 0, firstAccepted: "/sync answered 200")])
        #expect(!accepted.passed)
        #expect(accepted.detail.contains("d2"))
    }
}
