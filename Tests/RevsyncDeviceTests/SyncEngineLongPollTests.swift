import Foundation
import RevsyncWire
import Synchronization
import Testing

@testable import RevsyncDevice

/// `run()` and `waitForServerChanges(upTo:)` against the in-process server, whose
/// transport holds a long-poll until a commit or the wait's end (InMemoryTransport).
@Suite("Long-poll")
struct SyncEngineLongPollTests {
    /// A registered, bootstrapped engine on `harness`'s server with real sleeps.
    func device(
        _ harness: EngineHarness, _ name: String = "a", configure: (inout SyncEngineConfiguration) -> Void = { _ in }
    ) async throws -> SyncEngine {
        try await harness.device(name) { configuration in
            configuration.sleep = { try await Task.sleep(for: $0) }
            configure(&configuration)
        }
    }

    @Test(.timeLimit(.minutes(1)))
    func runWithAWaitOfZeroPollsAsBefore() async throws {
        let harness = try await EngineHarness()
        let device = try await device(harness) { configuration in
            configuration.wait = .zero
            configuration.pollInterval = .milliseconds(50)
        }
        let loop = Task { try await device.run() }
        defer { loop.cancel() }
        try await waitUntil { try await device.status().bootstrapped }
        try await device.transaction { tx in try tx.update("teams", id: harness.teamId, ["city": "Polled"]) }
        try await waitUntil { await harness.server.snapshotRecords("teams").first?["city"] == "Polled" }
        try await waitUntil { await harness.server.received.count >= 6 }
        loop.cancel()
        try await loop.value
        #expect(await harness.server.received.allSatisfy { $0.wait == nil }, "no request asks the server to wait")
        #expect(await harness.server.longPollsHeld == 0)
        try await harness.expectConverged(device)
    }

    @Test(.timeLimit(.minutes(1)))
    func aLocalChangeDuringALongPollIsSentWithoutWaitingForItsEnd() async throws {
        let harness = try await EngineHarness()
        let device = try await device(harness) { $0.wait = .seconds(60) }
        let loop = Task { try await device.run() }
        defer { loop.cancel() }
        try await waitUntil { await harness.server.holdingLongPoll }
        let started = ContinuousClock.now
        try await device.transaction { tx in try tx.update("teams", id: harness.teamId, ["city": "Now"]) }
        try await waitUntil { await harness.server.snapshotRecords("teams").first?["city"] == "Now" }
        #expect(ContinuousClock.now - started < .seconds(30), "sent long before the 60 s wait ends")
        #expect(await harness.server.longPollsCancelled >= 1, "the long-poll's request was cancelled")
        // And the loop goes back to waiting on the server.
        try await waitUntil {
            let holding = await harness.server.holdingLongPoll
            let held = await harness.server.longPollsHeld
            return holding && held >= 2
        }
        loop.cancel()
        try await loop.value
        try await harness.expectConverged(device)
    }

    @Test(.timeLimit(.minutes(1)))
    func aLongPollAnswersAsSoonAsAnotherDeviceCommits() async throws {
        let harness = try await EngineHarness()
        let a = try await device(harness, "a") { configuration in
            configuration.wait = .seconds(60)
            configuration.pollInterval = .seconds(600)
        }
        let b = try await harness.device("b")
        try await b.syncOnce()
        let loop = Task { try await a.run() }
        defer { loop.cancel() }
        try await waitUntil { await harness.server.holdingLongPoll }
        try await b.transaction { tx in try tx.update("teams", id: harness.teamId, ["city": "Pushed"]) }
        try await b.syncOnce()
        try await waitUntil { try await a.record("teams", id: harness.teamId)?["city"] == "Pushed" }
        loop.cancel()
        try await loop.value
        try await harness.expectConverged(a)
    }

    @Test(.timeLimit(.minutes(1)))
    func aLongPollAnsweredEmptyIsNeitherAFailureNorAPause() async throws {
        let harness = try await EngineHarness()
        let device = try await harness.device("a") { $0.wait = .milliseconds(100) }
        let loop = Task { try await device.run() }
        defer { loop.cancel() }
        try await waitUntil { await harness.server.longPollsHeld >= 4 }
        loop.cancel()
        try await loop.value
        #expect(harness.sleeps.recorded.isEmpty, "no backoff and no poll interval: \(harness.sleeps.recorded)")
        #expect(await harness.server.received.dropFirst().allSatisfy { $0.wait == 0.1 && $0.changeSets.isEmpty })
    }

    /// A server that does not hold long-polls: one that answers them at once, and one that refuses the wait.
    enum ServerWithoutLongPoll: CaseIterable, Sendable { case answersAtOnce, refusesTheWait }

    @Test(.timeLimit(.minutes(1)), arguments: ServerWithoutLongPoll.allCases)
    func aServerThatDoesNotHoldLongPollsIsPolledInstead(_ server: ServerWithoutLongPoll) async throws {
        let harness = try await EngineHarness()
        switch server {
        case .answersAtOnce: await harness.server.setHoldsLongPolls(false)
        case .refusesTheWait: await harness.server.setRefusesLongPolls(true)
        }
        let device = try await harness.device("a") { configuration in
            configuration.wait = .seconds(30)
            configuration.pollInterval = .seconds(45)
        }
        let loop = Task { try await device.run() }
        defer { loop.cancel() }
        try await waitUntil { harness.sleeps.recorded.contains(.seconds(45)) }
        loop.cancel()
        try await loop.value
    }

    @Test func aFailedLongPollIsThrownForTheCallerToRetry() async throws {
        let harness = try await EngineHarness()
        let transport = FaultInjectingTransport(wrapping: harness.server)
        let device = try await harness.device("a", transport: transport)
        try await device.syncOnce()
        await transport.inject(.failBeforeSending(.connection("reset (injected)")))
        await #expect(throws: SyncTransportError.connection("reset (injected)")) {
            try await device.waitForServerChanges(upTo: .seconds(60))
        }
        #expect(harness.sleeps.recorded.isEmpty, "not retried inside")
        #expect(await transport.requests.last?.wait == 60)
    }

    @Test(.timeLimit(.minutes(1)))
    func syncOnceEndsALongPollAndTakesItsTurn() async throws {
        let harness = try await EngineHarness()
        let device = try await harness.device("a")
        try await device.syncOnce()
        let poll = Task { try await device.waitForServerChanges(upTo: .seconds(60)) }
        try await waitUntil { await harness.server.holdingLongPoll }
        let started = ContinuousClock.now
        try await device.syncOnce()
        #expect(ContinuousClock.now - started < .seconds(30), "long before the 60 s wait ends")
        #expect(try await poll.value == .interrupted)
    }

    @Test func aDeviceWithSomethingToSendDoesNotWait() async throws {
        let harness = try await EngineHarness()
        let device = try await harness.device("a")
        try await device.syncOnce()
        try await device.transaction { tx in try tx.update("teams", id: harness.teamId, ["city": "Queued"]) }
        let requests = await harness.server.received.count
        #expect(try await device.waitForServerChanges(upTo: .seconds(60)) == .interrupted)
        #expect(await harness.server.received.count == requests, "nothing was asked of the server")
    }

    @Test(.timeLimit(.minutes(1)))
    func aLongPollDeliversTheChangeAndItsRevision() async throws {
        let harness = try await EngineHarness()
        let revisions = Mutex<[Int64]>([])
        let a = try await harness.device("a") { configuration in
            configuration.revisionObserver = { revision in revisions.withLock { $0.append(revision) } }
        }
        let b = try await harness.device("b")
        try await a.syncOnce()
        try await b.syncOnce()
        #expect(revisions.withLock { $0 } == [1, 1], "the snapshot, then the round's empty catch-up")
        let poll = Task { try await a.waitForServerChanges(upTo: .seconds(60)) }
        try await waitUntil { await harness.server.holdingLongPoll }
        try await b.transaction { tx in try tx.update("teams", id: harness.teamId, ["city": "Seen"]) }
        try await b.syncOnce()
        guard case .received(let report) = try await poll.value else {
            Issue.record("the long-poll should have received b's change")
            return
        }
        #expect(report.receivedChangeSets == 1)
        #expect(report.maxRevision == 2)
        #expect(revisions.withLock { $0.last } == 2)
        #expect(try await a.record("teams", id: harness.teamId)?["city"] == "Seen")
    }

    @Test(.timeLimit(.minutes(1)))
    func aLongPollWithNothingNewSaysSo() async throws {
        let harness = try await EngineHarness()
        let device = try await harness.device("a")
        try await device.syncOnce()
        #expect(try await device.waitForServerChanges(upTo: .milliseconds(100)) == .nothingNew(held: true))
        await harness.server.setHoldsLongPolls(false)
        let started = ContinuousClock.now
        let outcome = try await device.waitForServerChanges(upTo: .seconds(30))
        // "Held" means answered after a second or more: a machine loaded enough to take that long
        // for an answer at once cannot tell, and then only "nothing new" is checked.
        if ContinuousClock.now - started < .milliseconds(900) {
            #expect(outcome == .nothingNew(held: false))
        } else {
            #expect(outcome == .nothingNew(held: false) || outcome == .nothingNew(held: true))
        }
    }

    @Test(.timeLimit(.minutes(1)))
    func cancellingTheCallerCancelsTheLongPoll() async throws {
        let harness = try await EngineHarness()
        let device = try await harness.device("a")
        try await device.syncOnce()
        let poll = Task { try await device.waitForServerChanges(upTo: .seconds(60)) }
        try await waitUntil { await harness.server.holdingLongPoll }
        poll.cancel()
        await #expect(throws: CancellationError.self) { try await poll.value }
        #expect(await harness.server.longPollsCancelled == 1)
        // The slot is free again.
        try await device.syncOnce()
    }

    @Test(.timeLimit(.minutes(1)))
    func closingEndsALongPoll() async throws {
        let harness = try await EngineHarness()
        let device = try await harness.device("a")
        try await device.syncOnce()
        let poll = Task { try await device.waitForServerChanges(upTo: .seconds(60)) }
        try await waitUntil { await harness.server.holdingLongPoll }
        try await device.close()
        #expect(try await poll.value == .interrupted)
    }
}
