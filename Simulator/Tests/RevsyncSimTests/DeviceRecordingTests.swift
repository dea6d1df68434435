import Foundation
import RevsyncDevice
import RevsyncWire
import Testing

@testable import RevsyncSim

/// What a virtual device records for the verdict: acknowledgements by content, and
/// the answers its token gets once revoked.
@Suite struct DeviceRecordingTests {
    @Test func theLedgerPairsEachAcknowledgementWithWhatTheRequestCarriedUnderItsSeq() {
        var four = ChangeSet(seq: 4)
        four["notes"].create = [-3]
        four["notes"].attributes[-3] = ["body": "new"]
        var five = ChangeSet(seq: 5)
        five["notes"].delete = [12]
        let request = SyncRequest(maxRevision: 90, changeSets: [four, five])
        let response = SyncResponse(maxRevision: 120, changeSets: [
            // The device's own older change set in the catch-up (after a restore): not answering this request.
            ChangeSet(seq: 2, conflict: false, revision: 100),
            ChangeSet(conflict: false, revision: 110),
            ChangeSet(seq: 4, conflict: false, revision: 120),
            ChangeSet(seq: 5, conflict: true, reason: ConflictReason(code: .notFound, entity: "notes", id: 12, message: "gone")),
        ])
        let ledger = AcknowledgementLedger()
        ledger.record(request, response)
        ledger.record(request, response)
        #expect(ledger.acknowledged(by: "D1").kept == [AcknowledgedChangeSet(device: "d1", seq: 4, revision: 120, sent: four)])

        // The same seq acknowledged again with other content (a restored device) is kept apart.
        var again = ChangeSet(seq: 4)
        again["notes"].create = [-3]
        again["notes"].attributes[-3] = ["body": "after the restore"]
        ledger.record(SyncRequest(maxRevision: 120, changeSets: [again]), SyncResponse(maxRevision: 120, changeSets: [
            ChangeSet(seq: 4, conflict: false, revision: 120),
        ]))
        #expect(ledger.acknowledged(by: "d1").kept.map(\.sent) == [four, again] || ledger.acknowledged(by: "d1").kept.map(\.sent) == [again, four])
    }

    @Test func theWatchCountsOnlyRequestsSentOnceTheRevocationHadTimeToReachEveryInstance() {
        func exchange(_ status: Int?, path: String = "/sync", took: Duration = .zero) -> HTTPExchange {
            var exchange = HTTPExchange(path: path, changeSets: 1)
            exchange.status = status
            exchange.duration = took
            return exchange
        }
        let watch = RevocationWatch()
        watch.record(exchange(200))
        #expect(watch.summary(device: "d1") == nil)

        watch.revoked(at: .now)
        watch.record(exchange(200))
        #expect(watch.summary(device: "d1") == RevokedDevice(device: "d1", accepted: 0, refused: 0, other: 0, acceptedWithinBound: 1))

        let later = RevocationWatch()
        later.revoked(at: .now - .seconds(5))
        later.record(exchange(200, took: .seconds(10)))  // sent before the revocation
        later.record(exchange(401))
        later.record(exchange(nil))
        later.record(exchange(503))
        later.record(exchange(200, path: "/snapshot"))
        let summary = later.summary(device: "D1")
        #expect(summary?.accepted == 1 && summary?.refused == 1 && summary?.other == 2 && summary?.acceptedWithinBound == 0)
        #expect(summary?.firstAccepted?.hasPrefix("/snapshot answered 200, sent 5.") == true)

        // A rotated token: once the device was given the new one, its requests are not the old token's.
        let rotated = RevocationWatch()
        rotated.revoked(at: .now - .seconds(5))
        rotated.record(exchange(401))
        rotated.replaced(at: .now - .seconds(1))
        rotated.record(exchange(200, took: .milliseconds(10)))  // sent after the new token was given
        rotated.record(exchange(200, took: .seconds(2)))  // sent with the old one, 3 s after the rotation
        #expect(rotated.summary(device: "d2").map { [$0.refused, $0.accepted] } == [1, 1])
    }
}
