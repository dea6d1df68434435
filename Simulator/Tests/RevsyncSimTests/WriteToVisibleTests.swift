import Foundation
import RevsyncDevice
import RevsyncWire
import Synchronization
import Testing

@testable import RevsyncSim

/// The write-to-visible arithmetic: who counts for a revision, and what is measured.
@Suite struct WriteToVisibleTests {
    let t0 = ContinuousClock.now

    func at(_ milliseconds: Int) -> ContinuousClock.Instant { t0 + .milliseconds(milliseconds) }

    /// `count` devices, all bootstrapped at revision 10.
    func tracker(devices count: Int, maxAwaited: Int = 50_000) -> WriteToVisibleTracker {
        var tracker = WriteToVisibleTracker(maxAwaited: maxAwaited)
        for device in 0..<count { tracker.applied(10, on: device, at: t0) }
        return tracker
    }

    @Test func eachOtherOnlineDeviceGivesOneSampleFromTheAcknowledgementToItsApply() {
        var tracker = tracker(devices: 3)
        tracker.acknowledged(11, by: 0, at: at(0))
        tracker.applied(11, on: 1, at: at(100))
        tracker.applied(11, on: 0, at: at(150))  // the writer itself: not a sample
        tracker.applied(12, on: 2, at: at(300))  // past 11 in one step
        let summary = tracker.summary
        #expect(summary.latency.count == 2)
        #expect(abs(summary.latency.p50 - 100) < 1)
        #expect(abs(summary.latency.max - 300) < 1)
        #expect(summary.acknowledgements == 1)
        #expect(summary.unresolved == 0)
        #expect(summary.dropped == 0)
    }

    @Test func aDeviceOfflineAtTheAcknowledgementIsNotCountedForThatRevision() {
        var tracker = tracker(devices: 3)
        tracker.setAbsent(.linkOffline, true, device: 2)
        tracker.acknowledged(11, by: 0, at: at(0))
        tracker.setAbsent(.linkOffline, false, device: 2)
        tracker.applied(11, on: 1, at: at(50))
        tracker.applied(11, on: 2, at: at(5_000))
        #expect(tracker.summary.latency.count == 1)
        #expect(tracker.summary.latency.max < 51)
        // Back online, it counts for the next one.
        tracker.acknowledged(12, by: 0, at: at(6_000))
        tracker.applied(12, on: 2, at: at(6_200))
        #expect(tracker.summary.latency.count == 2)
    }

    @Test func aDeviceThatGoesAbsentBeforeApplyingIsDropped() {
        var tracker = tracker(devices: 3)
        tracker.acknowledged(11, by: 0, at: at(0))
        tracker.acknowledged(12, by: 0, at: at(10))
        tracker.setAbsent(.restarting, true, device: 2)
        tracker.applied(11, on: 1, at: at(100))
        tracker.applied(12, on: 1, at: at(100))
        tracker.setAbsent(.restarting, false, device: 2)
        tracker.applied(12, on: 2, at: at(9_000))
        let summary = tracker.summary
        #expect(summary.latency.count == 2)
        #expect(summary.dropped == 2)
        #expect(summary.unresolved == 0)
    }

    @Test func aRevokedDeviceStaysOutAndAbsencesAddUp() {
        var tracker = tracker(devices: 2)
        tracker.setAbsent(.revoked, true, device: 1)
        tracker.setAbsent(.linkOffline, true, device: 1)
        tracker.setAbsent(.linkOffline, false, device: 1)
        tracker.acknowledged(11, by: 0, at: at(0))
        tracker.applied(11, on: 1, at: at(10))
        #expect(tracker.summary.latency.count == 0)
        #expect(tracker.summary.unresolved == 0)
    }

    @Test func aDeviceWithoutItsFirstSnapshotDoesNotCount() {
        var tracker = tracker(devices: 2)
        tracker.acknowledged(11, by: 0, at: at(0))  // device 2 is joining: no revision yet
        tracker.applied(15, on: 2, at: at(60_000))  // its snapshot
        tracker.applied(11, on: 1, at: at(20))
        #expect(tracker.summary.latency.count == 1)
        tracker.acknowledged(16, by: 0, at: at(61_000))
        tracker.applied(16, on: 2, at: at(61_040))
        #expect(tracker.summary.latency.count == 2)
        #expect(tracker.summary.latency.max < 41)
    }

    @Test func aDeviceThatHeldTheRevisionBeforeTheAcknowledgementCountsAsZero() {
        var tracker = tracker(devices: 2)
        tracker.applied(11, on: 1, at: at(0))
        tracker.acknowledged(11, by: 0, at: at(200))
        let summary = tracker.summary
        #expect(summary.latency.count == 1)
        #expect(summary.latency.max == 0)
        #expect(summary.seenBeforeAcknowledgement == 1)
    }

    @Test func aRepeatedAcknowledgementIsNotANewWrite() {
        var tracker = tracker(devices: 2)
        tracker.acknowledged(11, by: 0, at: at(0))
        tracker.applied(11, on: 1, at: at(100))
        // The answer was lost; the resend brings the same acknowledgement again.
        tracker.acknowledged(11, by: 0, at: at(3_000))
        #expect(tracker.summary.acknowledgements == 1)
        #expect(tracker.summary.latency.count == 1)
        #expect(tracker.summary.seenBeforeAcknowledgement == 0)
    }

    @Test func acknowledgementsOutOfRevisionOrderAreBothResolved() {
        var tracker = tracker(devices: 3)
        tracker.acknowledged(12, by: 0, at: at(0))
        tracker.acknowledged(11, by: 1, at: at(10))
        tracker.applied(12, on: 2, at: at(110))
        let summary = tracker.summary
        #expect(summary.latency.count == 2)
        #expect(summary.unresolved == 2, "device 1 has not applied 12, device 0 not 11")
        tracker.applied(12, on: 0, at: at(500))
        tracker.applied(12, on: 1, at: at(500))
        #expect(tracker.summary.unresolved == 0)
        #expect(tracker.summary.latency.count == 4)
    }

    @Test func memoryIsBoundedByGivingUpTheOldestAwaitedRevision() {
        var tracker = tracker(devices: 2, maxAwaited: 2)
        for revision in Int64(11)...13 { tracker.acknowledged(revision, by: 0, at: at(Int(revision))) }
        #expect(tracker.summary.unresolved == 3)
        tracker.applied(13, on: 1, at: at(100))
        let summary = tracker.summary
        #expect(summary.latency.count == 2, "11 was given up")
        #expect(summary.unresolved == 1)
    }

    @Test func theRecorderTakesAcknowledgementsFromTheTransportAndRevisionsFromTheEngine() {
        let recorder = WriteToVisibleRecorder()
        recorder.applied(5, on: 0)
        recorder.applied(5, on: 1)
        recorder.acknowledged([7, 6], by: 0)
        recorder.applied(7, on: 1)
        let summary = recorder.summary
        #expect(summary.acknowledgements == 2)
        #expect(summary.latency.count == 2)
        #expect(summary.unresolved == 0)
    }

    @Test func theTransportReportsOnlyAcknowledgementsOfWhatTheRequestCarried() async throws {
        struct Canned: RevsyncDevice.SyncTransport {
            let response: SyncResponse
            func sync(_ request: SyncRequest, token: String) async throws -> SyncResponse { response }
            func snapshot(token: String) async throws -> SyncResponse { response }
            func schema(token: String) async throws -> SchemaDocument { throw CancellationError() }
            func register(_ registration: DeviceRegistration, adminToken: String) async throws -> RegisteredDevice {
                throw CancellationError()
            }
        }
        let response = SyncResponse(maxRevision: 30, changeSets: [
            ChangeSet(seq: 1, conflict: false, revision: 20),  // not in this request (a restored device's older one)
            ChangeSet(conflict: false, revision: 25),  // another device's
            ChangeSet(seq: 3, conflict: false, revision: 29),
            ChangeSet(seq: 4, conflict: true, reason: ConflictReason(code: .notFound, entity: "notes", id: 1, message: "gone")),
        ])
        let reported = Mutex<[[Int64]]>([])
        let transport = RecordingTransport(
            base: Canned(response: response), ledger: AcknowledgementLedger(),
            onAcknowledged: { revisions in reported.withLock { $0.append(revisions) } })
        _ = try await transport.sync(SyncRequest(maxRevision: 19, changeSets: [ChangeSet(seq: 3), ChangeSet(seq: 4)]), token: "t")
        _ = try await transport.sync(SyncRequest(maxRevision: 30, wait: 25), token: "t")
        #expect(reported.withLock { $0 } == [[29]])
    }
}
