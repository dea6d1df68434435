import Foundation
import RevsyncTestSupport
import Testing

@testable import RevsyncDevice

/// `run()`'s long-poll against the real server (see LiveServerTests): the server
/// holds a `/sync` with `wait` until a commit passes the device's revision.
///
/// Needs PostgreSQL and Redis: `Scripts/stack start` (or `Scripts/test`).
@Suite("Long-poll against the live server", .serialized)
struct LiveLongPollTests {
    // Three minutes, as in LiveServerTests: the whole suite's load, not this test, sets its time.
    @Test(.timeLimit(.minutes(3)))
    func aHeldLongPollBringsAnotherDevicesChangeAtOnceAndALocalChangeCutsIt() async throws {
        try await withLiveDevices { devices in
            let seed = try await devices.seed()
            var configuration = devices.configuration()
            configuration.sleep = { try await Task.sleep(for: $0) }
            configuration.wait = .seconds(15)
            configuration.pollInterval = .seconds(120)
            let a = try await devices.device("a", configuration: configuration)
            let b = try await devices.bootstrapped("b")
            try await a.syncOnce()

            // Nothing committed: the server holds the request for the whole wait.
            let started = ContinuousClock.now
            #expect(try await a.waitForServerChanges(upTo: .seconds(1)) == .nothingNew(held: true))
            #expect(ContinuousClock.now - started >= .milliseconds(900))

            let loop = Task { try await a.run() }
            defer { loop.cancel() }
            try await Task.sleep(for: .milliseconds(300))
            try await b.transaction { tx in try tx.update("teams", id: seed.team, ["city": "Pushed"]) }
            try await b.syncOnce()
            // Far sooner than the 15 s wait or the 120 s poll.
            try await waitUntil { try await a.record("teams", id: seed.team)?["city"] == "Pushed" }

            // A waits again; its own change goes out at once.
            try await Task.sleep(for: .milliseconds(300))
            try await a.transaction { tx in try tx.update("teams", id: seed.team, ["city": "Back"]) }
            try await waitUntil { try await devices.serverRecords("teams").first { $0.id == seed.team }?["city"] == "Back" }
            try await waitUntil { try await a.pendingChangeSets().isEmpty }
            try await b.syncOnce()
            loop.cancel()
            try await loop.value
            try await devices.expectConverged(a, b)
        }
    }
}
