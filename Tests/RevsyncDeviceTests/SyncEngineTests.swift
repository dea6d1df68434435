import Foundation
import RevsyncWire
import Testing

@testable import RevsyncDevice

/// The engine over SQLite against an in-process fake server (the real rules over in-memory stores: see InMemoryTransport).
@Suite("Sync engine")
struct SyncEngineTests {
    @Test func aNewDeviceBootstrapsAndMirrorsTheServer() async throws {
        let harness = try await EngineHarness()
        let device = try await harness.device("a")
        let before = try await device.status()
        #expect(before.registered && !before.bootstrapped)
        let report = try await device.syncOnce()
        #expect(report.bootstrapped)
        try await harness.expectConverged(device)
        let after = try await device.status()
        #expect(after.bootstrapped)
        #expect(after.maxRevision == 1)
        #expect(try await device.record("teams", id: harness.teamId)?["name"] == "Owls")
    }

    @Test func twoDevicesEditOfflineSyncAndConverge() async throws {
        let harness = try await EngineHarness()
        let a = try await harness.device("a")
        let b = try await harness.device("b")
        try await a.syncOnce()
        try await b.syncOnce()
        let team = harness.teamId
        let league = harness.leagueId

        let player = try await a.transaction { tx in
            let user = try tx.create("users", ["first_name": "Ana"])
            let player = try tx.create("players", ["team_id": .integer(team), "user_id": .integer(user), "number": 9])
            try tx.create("notes", ["player_id": .integer(player), "body": "quick"])
            return player
        }
        try await a.transaction { tx in try tx.update("teams", id: team, ["city": "York"]) }
        try await b.transaction { tx in
            let rival = try tx.create("teams", ["league_id": .integer(league), "name": "Rooks"])
            try tx.create("players", ["team_id": .integer(rival), "rating": 3])
            try tx.update("leagues", id: league, ["country": "UK"])
        }

        try await a.syncOnce()
        try await b.syncOnce()
        try await a.syncOnce()
        try await harness.expectConverged(a)
        try await harness.expectConverged(b)
        let mapped = try #require(try await a.record("players", id: player))
        #expect(mapped.id > 0, "the temporary id finds the record under its permanent id")
        #expect(try await b.record("players", id: mapped.id)?["number"] == 9)
    }

    @Test func aStaleUpdateIsRejectedAndTheLoserNotified() async throws {
        let harness = try await EngineHarness()
        let a = try await harness.device("a")
        let b = try await harness.device("b")
        try await a.syncOnce()
        try await b.syncOnce()
        let team = harness.teamId
        let conflicts = b.conflicts()

        try await a.transaction { tx in try tx.update("teams", id: team, ["name": "Owls A"]) }
        try await b.transaction { tx in try tx.update("teams", id: team, ["name": "Owls B", "city": "Bath"]) }
        try await a.syncOnce()
        let report = try await b.syncOnce()
        try await a.syncOnce()

        #expect(report.conflicts.map(\.reason.code) == [.staleRevision])
        var iterator = conflicts.makeAsyncIterator()
        let notification = try #require(await iterator.next())
        #expect(notification.reason.code == .staleRevision)
        #expect(notification.rejected?.entities["teams"]?.attributes[team]?["name"] == "Owls B")
        #expect(notification.restored["teams"]?.first?["name"] == "Owls A")
        #expect(try await b.record("teams", id: team)?["city"] == "Leeds", "the rejected edit is undone whole")
        try await harness.expectConverged(a)
        try await harness.expectConverged(b)
        #expect(try await b.storedConflicts().count == 1)
        try await b.dismissConflicts(through: notification.id ?? 0)
        #expect(try await b.storedConflicts().isEmpty)
    }

    @Test func anUpdateOfARecordDeletedElsewhereIsRejectedAsNotFound() async throws {
        let harness = try await EngineHarness()
        let a = try await harness.device("a")
        let b = try await harness.device("b")
        try await a.syncOnce()
        let player = try await a.transaction { tx in try tx.create("players", ["team_id": .integer(harness.teamId)]) }
        try await a.syncOnce()
        let playerId = try #require(try await a.record("players", id: player)?.id)
        try await b.syncOnce()

        try await a.transaction { tx in try tx.delete("players", id: playerId) }
        try await b.transaction { tx in try tx.update("players", id: playerId, ["number": 4]) }
        try await a.syncOnce()
        let report = try await b.syncOnce()
        #expect(report.conflicts.map(\.reason.code) == [.notFound])
        #expect(try await b.record("players", id: playerId) == nil)
        try await harness.expectConverged(a)
        try await harness.expectConverged(b)
    }

    @Test func aCreateReferencingADeletedRecordIsRejectedAndDropped() async throws {
        let harness = try await EngineHarness()
        let a = try await harness.device("a")
        let b = try await harness.device("b")
        try await a.syncOnce()
        let rival = try await a.transaction { tx in try tx.create("teams", ["league_id": .integer(harness.leagueId), "name": "Rooks"]) }
        try await a.syncOnce()
        let rivalId = try #require(try await a.record("teams", id: rival)?.id)
        try await b.syncOnce()

        try await a.transaction { tx in try tx.delete("teams", id: rivalId) }
        let newPlayer = try await b.transaction { tx in try tx.create("players", ["team_id": .integer(rivalId), "number": 1]) }
        try await a.syncOnce()
        let report = try await b.syncOnce()
        #expect(report.conflicts.map(\.reason.code) == [.reference])
        #expect(report.conflicts.first?.dropped["players"] == [newPlayer])
        #expect(try await b.record("players", id: newPlayer) == nil)
        try await harness.expectConverged(b)
    }

    @Test func aRejectedDeleteRestoresWhatItCascadedLocally() async throws {
        let harness = try await EngineHarness()
        let a = try await harness.device("a")
        let b = try await harness.device("b")
        try await a.syncOnce()
        try await a.transaction { tx in try tx.create("players", ["team_id": .integer(harness.teamId), "number": 5]) }
        try await a.syncOnce()
        try await b.syncOnce()

        try await a.transaction { tx in try tx.update("teams", id: harness.teamId, ["city": "Hull"]) }
        try await b.transaction { tx in try tx.delete("teams", id: harness.teamId) }
        #expect(try await b.records("players").isEmpty, "the delete cascades locally")
        try await a.syncOnce()
        let report = try await b.syncOnce()
        #expect(report.conflicts.map(\.reason.code) == [.staleRevision])
        #expect(try await b.records("players").count == 1)
        try await harness.expectConverged(b)
    }

    @Test func aResponseLostAfterTheServerCommittedMakesNoDuplicate() async throws {
        let harness = try await EngineHarness()
        let transport = FaultInjectingTransport(wrapping: harness.server)
        let device = try await harness.device("a", transport: transport)
        try await device.syncOnce()
        let team = try await device.transaction { tx in try tx.create("teams", ["league_id": .integer(harness.leagueId), "name": "Hawks"]) }

        await transport.inject(.loseResponse)
        let report = try await device.syncOnce()
        #expect(report.retries == 1)
        #expect(report.acknowledged == [1])
        #expect(await transport.lostResponses.count == 1)
        #expect(await harness.server.snapshotRecords("teams").filter { $0["name"] == "Hawks" }.count == 1)
        #expect(try await device.record("teams", id: team)?.id ?? 0 > 0)
        try await harness.expectConverged(device)
    }

    @Test func aCrashBetweenSendingAndApplyingConvergesAfterRestart() async throws {
        let harness = try await EngineHarness()
        let path = try temporaryDatabasePath()
        let transport = FaultInjectingTransport(wrapping: harness.server)
        var first: SyncEngine? = try await harness.device("a", path: path, transport: transport, maxAttempts: 1)
        try await first?.syncOnce()
        let (team, player) = try #require(try await first?.transaction { tx in
            let team = try tx.create("teams", ["league_id": .integer(harness.leagueId), "name": "Hawks"])
            return (team, try tx.create("players", ["team_id": .integer(team)]))
        })
        try await first?.transaction { tx in try tx.update("teams", id: team, ["city": "Bath"]) }

        // The server commits both change sets, then the device dies before applying the answer.
        await transport.inject(.loseResponse)
        await #expect(throws: SyncTransportError.self) { try await first?.syncOnce() }
        first = nil

        let restarted = try SyncEngine(databasePath: path, transport: harness.server, configuration: harness.configuration())
        #expect(try await restarted.status().pendingChangeSets == 2)
        #expect(try await restarted.record("teams", id: team)?["city"] == "Bath")
        let report = try await restarted.syncOnce()
        #expect(report.acknowledged == [1, 2])
        #expect(await harness.server.snapshotRecords("teams").filter { $0["name"] == "Hawks" }.count == 1)
        #expect(await harness.server.snapshotRecords("players").count == 1)
        #expect(try await restarted.record("players", id: player)?.id ?? 0 > 0)
        try await harness.expectConverged(restarted)
    }

    @Test func aDeviceBehindTheRetainedLogBootstrapsAgainAndKeepsItsPendingEdits() async throws {
        let harness = try await EngineHarness()
        let a = try await harness.device("a")
        let b = try await harness.device("b")
        try await a.syncOnce()
        try await b.syncOnce()
        try await b.transaction { tx in try tx.update("leagues", id: harness.leagueId, ["country": "UK"]) }
        try await b.syncOnce()
        await harness.server.dropLog()

        let player = try await a.transaction { tx in try tx.create("players", ["team_id": .integer(harness.teamId), "number": 8]) }
        try await a.transaction { tx in try tx.update("teams", id: harness.teamId, ["city": "York"]) }
        let report = try await a.syncOnce()
        #expect(report.bootstrapped)
        #expect(report.acknowledged == [1, 2])
        #expect(try await a.record("leagues", id: harness.leagueId)?["country"] == "UK")
        #expect(try await a.record("players", id: player)?["number"] == 8)
        try await harness.expectConverged(a)
    }

    @Test func aResetServerMakesTheDeviceBootstrapAgain() async throws {
        let harness = try await EngineHarness()
        let a = try await harness.device("a")
        try await a.syncOnce()
        // Claim a revision the server never had.
        let layout = try #require(await a.layout)
        try await a.database.writer.write { db in
            let store = SQLiteRecordStore(db, layout: layout)
            var meta = try store.meta()
            meta.maxRevision = 99
            try store.setMeta(meta)
        }
        let report = try await a.syncOnce()
        #expect(report.bootstrapped)
        #expect(try await a.status().maxRevision == 1)
    }

    @Test func transientFailuresAreRetriedWithBackoffAndRetryAfter() async throws {
        let harness = try await EngineHarness()
        let transport = FaultInjectingTransport(wrapping: harness.server)
        let device = try await harness.device("a", transport: transport)
        try await device.syncOnce()
        try await device.transaction { tx in try tx.update("teams", id: harness.teamId, ["city": "York"]) }
        await transport.inject(.failBeforeSending(.unavailable(retryAfter: .seconds(7), message: "db down")))
        await transport.inject(.failBeforeSending(.connection("reset")))
        await transport.inject(.failBeforeSending(.serverError(status: 502, message: "bad gateway")))
        let report = try await device.syncOnce()
        #expect(report.retries == 3)
        #expect(report.acknowledged == [1])
        // Retry-After, then equal-jitter backoff (jitter 0.5) from 250 ms.
        #expect(harness.sleeps.recorded == [.seconds(7), .milliseconds(375), .milliseconds(750)])
        let seqs = await transport.requests.dropFirst().map { $0.changeSets.compactMap(\.seq) }
        #expect(seqs == [[1], [1], [1], [1]], "every retry carries the same seq")
    }

    @Test func retriesStopAfterMaxAttempts() async throws {
        let harness = try await EngineHarness()
        let transport = FaultInjectingTransport(wrapping: harness.server)
        let device = try await harness.device("a", transport: transport, maxAttempts: 2)
        try await device.syncOnce()
        await transport.inject(.failBeforeSending(.connection("down")))
        await transport.inject(.failBeforeSending(.connection("down")))
        await #expect(throws: SyncTransportError.connection("down")) { try await device.syncOnce() }
    }

    @Test func editsMadeWhileARequestIsInFlightAreKeptAndSentNext() async throws {
        let harness = try await EngineHarness()
        let transport = FaultInjectingTransport(wrapping: harness.server)
        let device = try await harness.device("a", transport: transport)
        try await device.syncOnce()
        let team = harness.teamId
        try await device.transaction { tx in try tx.update("teams", id: team, ["city": "First"]) }
        let once = Once()
        await transport.setInFlightHook { _ in
            await once.run {
                _ = try? await device.transaction { tx in try tx.update("teams", id: team, ["city": "Second", "name": "Owls FC"]) }
            }
        }
        let report = try await device.syncOnce()
        #expect(report.acknowledged == [1, 2])
        #expect(await transport.requests.dropFirst().map { $0.changeSets.compactMap(\.seq) } == [[1], [2]])
        #expect(try await device.record("teams", id: team)?["city"] == "Second")
        #expect(await harness.server.snapshotRecords("teams").first { $0.id == team }?["city"] == "Second")
        try await harness.expectConverged(device)
    }

    @Test func aSequenceGapRenumbersThePendingChangeSets() async throws {
        let harness = try await EngineHarness()
        let device = try await harness.device("a")
        try await device.syncOnce()
        try await device.transaction { tx in try tx.update("teams", id: harness.teamId, ["city": "A"]) }
        try await device.transaction { tx in try tx.update("teams", id: harness.teamId, ["city": "B"]) }
        try await device.syncOnce()
        try await harness.server.forgetSequence(of: try await harness.server.registration("a").token)
        try await device.transaction { tx in try tx.update("teams", id: harness.teamId, ["city": "C"]) }
        let report = try await device.syncOnce()
        #expect(report.acknowledged == [1])
        try await harness.expectConverged(device)
    }

    @Test func tooLargeRequestsAreSplit() async throws {
        let harness = try await EngineHarness()
        let device = try await harness.device("a")
        try await device.syncOnce()
        for city in ["A", "B", "C", "D", "E"] {
            try await device.transaction { tx in try tx.update("teams", id: harness.teamId, ["city": .string(city)]) }
        }
        await harness.server.setRequestLimit(2)
        let report = try await device.syncOnce()
        #expect(report.acknowledged == [1, 2, 3, 4, 5])
        let sizes = await harness.server.received.suffix(4).map(\.changeSets.count)
        #expect(sizes == [5, 2, 2, 1])
        try await harness.expectConverged(device)
    }

    @Test func catchUpFollowsMore() async throws {
        let harness = try await EngineHarness()
        let a = try await harness.device("a")
        let b = try await harness.device("b")
        try await a.syncOnce()
        try await b.syncOnce()
        for number in 1...5 {
            try await b.transaction { tx in try tx.create("players", ["team_id": .integer(harness.teamId), "number": .integer(Int64(number))]) }
        }
        try await b.syncOnce()
        await harness.server.setCatchUpLimit(2)
        let report = try await a.syncOnce()
        #expect(report.requests == 3)
        #expect(report.receivedChangeSets == 5)
        try await harness.expectConverged(a)
    }

    @Test func anUnknownTokenIsThrownNotRetried() async throws {
        let harness = try await EngineHarness()
        let device = try SyncEngine(databasePath: nil, transport: harness.server, configuration: harness.configuration())
        await #expect(throws: DeviceError.notRegistered) { try await device.syncOnce() }
        try await device.useToken("bogus")
        let error = await #expect(throws: SyncTransportError.self) { try await device.syncOnce() }
        guard case .unauthorized? = error else { Issue.record("expected unauthorized, got \(String(describing: error))"); return }
        #expect(harness.sleeps.recorded.isEmpty)
    }

    @Test func aFailedTransactionLeavesNoTrace() async throws {
        let harness = try await EngineHarness()
        let device = try await harness.device("a")
        try await device.syncOnce()
        struct Abort: Error {}
        await #expect(throws: Abort.self) {
            try await device.transaction { tx in
                try tx.create("leagues", ["name": "Doomed"])
                try tx.update("teams", id: harness.teamId, ["city": "Nowhere"])
                throw Abort()
            }
        }
        await #expect(throws: DeviceError.self) {
            try await device.transaction { tx in try tx.delete("leagues", id: harness.leagueId) }
        }
        #expect(try await device.pendingChangeSets().isEmpty)
        let next = try await device.transaction { tx in try tx.create("leagues", ["name": "Kept"]) }
        #expect(next == -1, "the temporary id counter was not consumed")
        try await device.syncOnce()
        #expect(await harness.server.snapshotRecords("teams").first?["city"] == "Leeds")
    }

    @Test func everythingSurvivesAReopen() async throws {
        let harness = try await EngineHarness()
        let path = try temporaryDatabasePath()
        let first = try await harness.device("a", path: path)
        try await first.syncOnce()
        let league = try await first.transaction { tx in try tx.create("leagues", ["name": "One"]) }
        try await first.close()
        await #expect(throws: DeviceError.closed) { try await first.record("leagues", id: league) }

        let reopened = try SyncEngine(databasePath: path, transport: harness.server, configuration: harness.configuration())
        let status = try await reopened.status()
        #expect(status.registered && status.bootstrapped && status.pendingChangeSets == 1 && status.maxRevision == 1)
        #expect(try await reopened.record("leagues", id: league)?["name"] == "One")
        let next = try await reopened.transaction { tx in try tx.create("leagues", ["name": "Two"]) }
        #expect(next == league - 1)
        let report = try await reopened.syncOnce()
        #expect(report.acknowledged == [1, 2])
        try await harness.expectConverged(reopened)
    }

    @Test func changesArePublishedForLocalEditsAndSync() async throws {
        let harness = try await EngineHarness()
        let a = try await harness.device("a")
        let b = try await harness.device("b")
        try await a.syncOnce()
        try await b.syncOnce()
        let events = a.changes()
        var iterator = events.makeAsyncIterator()

        let league = try await a.transaction { tx in try tx.create("leagues", ["name": "New"]) }
        let local = try #require(await iterator.next())
        #expect(local.origin == .local(seq: 1))
        #expect(local.records.upserted == ["leagues": [league]])

        try await b.transaction { tx in try tx.update("teams", id: harness.teamId, ["city": "Hull"]) }
        try await b.syncOnce()
        try await a.syncOnce()
        let synced = try #require(await iterator.next())
        #expect(synced.origin == .sync)
        #expect(synced.idMappings.map(\.temporaryId) == [league])
        #expect(synced.records.upserted["teams"] == [harness.teamId])
        #expect(synced.records.deleted["leagues"] == [league])
    }

    /// During a rolling schema upgrade the schema a device is given may lag the answers it gets
    /// (an instance not upgraded yet gave it): `run()` retries until they agree instead of
    /// stopping (here in the bootstrap, whose snapshot names an attribute the schema given lacks).
    @Test func runRetriesWhileTheSchemaLagsTheAnswers() async throws {
        let harness = try await EngineHarness()
        var stale = TestSchema.document()
        stale.entities[1].attributes.removeAll { $0.name == "city" }  // teams, whose seeded record has a city
        await harness.server.serveStaleSchema(stale, calls: 2)
        let device = try await harness.device("a", configure: { $0.pollInterval = .milliseconds(20) })
        let loop = Task { try await device.run() }
        try await waitUntil { try await device.status().bootstrapped }
        #expect(try await device.records("teams").first?["city"] == "Leeds")
        loop.cancel()
        try await loop.value
        try await harness.expectConverged(device)
    }

    @Test func runSyncsLocalChangesUntilCancelled() async throws {
        let harness = try await EngineHarness()
        var configuration = harness.configuration()
        configuration.sleep = { try await Task.sleep(for: $0) }
        configuration.pollInterval = .seconds(60)
        let device = try SyncEngine(databasePath: nil, transport: harness.server, configuration: configuration)
        try await device.register(DeviceRegistration(name: "a", user: "a", role: "member"), adminToken: harness.server.adminToken)
        let loop = Task { try await device.run() }

        try await waitUntil { try await device.status().bootstrapped }
        try await device.transaction { tx in try tx.update("teams", id: harness.teamId, ["city": "Live"]) }
        try await waitUntil { await harness.server.snapshotRecords("teams").first?["city"] == "Live" }
        try await waitUntil { try await device.pendingChangeSets().isEmpty }
        loop.cancel()
        try await loop.value
        try await harness.expectConverged(device)
    }
}

/// Polls `condition` for up to five seconds.
func waitUntil(_ condition: () async throws -> Bool, sourceLocation: SourceLocation = #_sourceLocation) async throws {
    for _ in 0..<500 {
        if try await condition() { return }
        try await Task.sleep(for: .milliseconds(10))
    }
    Issue.record("condition not met in time", sourceLocation: sourceLocation)
}
