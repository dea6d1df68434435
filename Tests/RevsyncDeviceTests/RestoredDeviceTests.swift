import Foundation
import RevsyncWire
import Testing

@testable import RevsyncDevice

/// A device whose SQLite file is older than what the server has seen of it (a
/// phone restored from last week's backup): its counters are behind, so its new
/// edits reuse seqs and temporary ids the server already handled as other
/// content. Against the fake server, which refuses those as `seq_reused`.
@Suite("Restored devices")
struct RestoredDeviceTests {
    /// Device "a" on a file; after `beforeBackup` its file is copied (the backup),
    /// then it reopens, syncs, runs `afterBackup`, syncs and closes. Returns the backup's path.
    private func backupOverTakenByLaterChanges(
        _ harness: EngineHarness, beforeBackup: @Sendable (SyncEngine) async throws -> Void,
        afterBackup: @Sendable (SyncEngine) async throws -> Void
    ) async throws -> String {
        let path = try temporaryDatabasePath()
        let backup = path + ".backup"
        let a = try await harness.device("a", path: path)
        try await a.syncOnce()
        try await beforeBackup(a)
        try await a.close()
        try copyDatabase(path, to: backup)

        let later = try SyncEngine(databasePath: path, transport: harness.server, configuration: harness.configuration())
        try await later.syncOnce()
        try await afterBackup(later)
        try await later.syncOnce()
        #expect(try await later.pendingChangeSets().isEmpty)
        try await later.close()
        return backup
    }

    /// The backup has synced one note (seq 1); the lost copy then made a note and a team update (seqs 2, 3).
    private func syncedBackup(_ harness: EngineHarness) async throws -> String {
        let team = harness.teamId
        return try await backupOverTakenByLaterChanges(harness) { a in
            try await a.transaction { tx in try tx.create("notes", ["body": "first"]) }
            try await a.syncOnce()
        } afterBackup: { a in
            try await a.transaction { tx in try tx.create("notes", ["body": "after the backup"]) }
            try await a.transaction { tx in try tx.update("teams", id: team, ["city": "York"]) }
        }
    }

    private func noteBodies(_ harness: EngineHarness) async -> [String] {
        await harness.server.snapshotRecords("notes").compactMap { $0["body"]?.stringValue }.sorted()
    }

    @Test func newEditsThatReuseSeqsAreRenumberedAndReachTheServer() async throws {
        let harness = try await EngineHarness()
        let backup = try await syncedBackup(harness)
        let team = harness.teamId

        let restored = try SyncEngine(databasePath: backup, transport: harness.server, configuration: harness.configuration())
        // Made before the first sync: numbered with the backup's counters (seqs 2, 3; temporary ids -2, -3).
        let (player, note) = try await restored.transaction { tx in
            let player = try tx.create("players", ["team_id": .integer(team), "number": 7])
            return (player, try tx.create("notes", ["player_id": .integer(player), "body": "SECOND different edit"]))
        }
        try await restored.transaction { tx in try tx.update("players", id: player, ["number": 8]) }
        #expect(try await restored.pendingChangeSets().map(\.seq) == [2, 3])
        #expect(player == -2, "the temporary id the lost copy used for its note")
        let events = restored.changes()
        var iterator = events.makeAsyncIterator()

        let report = try await restored.syncOnce()
        #expect(report.conflicts.isEmpty)
        #expect(report.acknowledged == [4, 5])
        // Refused whole, naming seq 2 as the first reused one, then sent renumbered.
        #expect(await harness.server.received.suffix(2).map { $0.changeSets.compactMap(\.seq) } == [[2, 3], [4, 5]])

        let repair = try #require(await iterator.next())
        #expect(repair.renamedTemporaryIds == [
            TemporaryIdRename(entity: "players", from: player, to: -4), TemporaryIdRename(entity: "notes", from: note, to: -5),
        ])

        #expect(await noteBodies(harness) == ["SECOND different edit", "after the backup", "first"], "nothing lost, nothing twice")
        let players = await harness.server.snapshotRecords("players")
        #expect(players.count == 1 && players.first?["number"] == 8)
        let mine = try #require(try await restored.record("players", id: player), "the app's old temporary id still finds its record")
        #expect(mine.id == players.first?.id)
        #expect(try await restored.record("notes", id: note)?["player_id"] == .integer(mine.id))
        #expect(await harness.server.snapshotRecords("teams").first?["city"] == "York", "the lost copy's edits stay")
        try await harness.expectConverged(restored)

        try await restored.transaction { tx in try tx.update("players", id: player, ["number": 9]) }
        #expect(try await restored.syncOnce().acknowledged == [6])
        #expect(await harness.server.snapshotRecords("players").first?["number"] == 9)
    }

    @Test func changeSetsPendingAtTheBackupAreRetriedOnceAndOnlyLaterOnesRenumbered() async throws {
        let harness = try await EngineHarness()
        let team = harness.teamId
        // The backup holds seq 1 unsent; the lost copy sent it, then made seqs 2 and 3.
        let backup = try await backupOverTakenByLaterChanges(harness) { a in
            _ = try await a.transaction { tx in try tx.create("notes", ["body": "first"]) }
        } afterBackup: { a in
            try await a.transaction { tx in try tx.create("notes", ["body": "after the backup"]) }
            try await a.transaction { tx in try tx.update("teams", id: team, ["city": "York"]) }
        }

        // A server that does not name the reused seq: the engine finds it by probing.
        await harness.server.setNamesFirstReusedSeq(false)
        let restored = try SyncEngine(databasePath: backup, transport: harness.server, configuration: harness.configuration())
        try await restored.transaction { tx in try tx.create("notes", ["body": "SECOND different edit"]) }
        try await restored.transaction { tx in try tx.update("teams", id: team, ["city": "Bath"]) }
        #expect(try await restored.pendingChangeSets().map { $0.seq } == [1, 2, 3])

        let report = try await restored.syncOnce()
        #expect(report.conflicts.isEmpty)
        #expect(report.acknowledged == [1, 4, 5], "seq 1 is the same change set: acknowledged with its old revision")
        #expect(await harness.server.received.suffix(4).map { $0.changeSets.compactMap(\.seq) } == [[1, 2, 3], [1, 2], [1], [1, 4, 5]])
        #expect(await noteBodies(harness) == ["SECOND different edit", "after the backup", "first"])
        #expect(await harness.server.snapshotRecords("teams").first?["city"] == "Bath")
        try await harness.expectConverged(restored)
    }

    @Test func theSeqTheServerNamesEndsTheSearchWithoutProbing() async throws {
        let harness = try await EngineHarness()
        let team = harness.teamId
        let backup = try await backupOverTakenByLaterChanges(harness) { a in
            _ = try await a.transaction { tx in try tx.create("notes", ["body": "first"]) }
        } afterBackup: { a in
            try await a.transaction { tx in try tx.create("notes", ["body": "after the backup"]) }
            try await a.transaction { tx in try tx.update("teams", id: team, ["city": "York"]) }
        }
        let restored = try SyncEngine(databasePath: backup, transport: harness.server, configuration: harness.configuration())
        try await restored.transaction { tx in try tx.create("notes", ["body": "SECOND different edit"]) }
        try await restored.transaction { tx in try tx.update("teams", id: team, ["city": "Bath"]) }

        let report = try await restored.syncOnce()
        #expect(report.acknowledged == [1, 4, 5])
        // Refused naming seq 2: seq 1 is a retry, 2 and 3 are renumbered, with no probe in between.
        #expect(await harness.server.received.suffix(2).map { $0.changeSets.compactMap(\.seq) } == [[1, 2, 3], [1, 4, 5]])
        #expect(await noteBodies(harness) == ["SECOND different edit", "after the backup", "first"])
        try await harness.expectConverged(restored)
    }

    @Test func pendingRetriesBeyondOneRequestAreCheckedBeforeAnyAnswerIsApplied() async throws {
        let harness = try await EngineHarness()
        let team = harness.teamId
        let backup = try await backupOverTakenByLaterChanges(harness) { a in
            for body in ["one", "two", "three"] {
                try await a.transaction { tx in try tx.create("notes", ["body": .string(body)]) }
            }
        } afterBackup: { a in
            try await a.transaction { tx in try tx.create("notes", ["body": "after the backup"]) }
            try await a.transaction { tx in try tx.update("teams", id: team, ["city": "York"]) }
        }

        await harness.server.setNamesFirstReusedSeq(false)
        var configuration = harness.configuration()
        configuration.maxChangeSetsPerRequest = 2
        let restored = try SyncEngine(databasePath: backup, transport: harness.server, configuration: configuration)
        let note = try await restored.transaction { tx in try tx.create("notes", ["body": "SECOND different edit"]) }
        try await restored.transaction { tx in try tx.update("teams", id: team, ["city": "Bath"]) }
        #expect(try await restored.pendingChangeSets().map(\.seq) == [1, 2, 3, 4, 5])

        // The first batch [1, 2] alone would be accepted, and its catch-up would carry the lost
        // copy's seqs 4 and 5 as acknowledgements of the new edits: they are checked first.
        let report = try await restored.syncOnce()
        #expect(report.conflicts.isEmpty)
        #expect(report.acknowledged == [1, 2, 3, 6, 7])
        // Seq 3 comes back in the catch-up of [1, 2] but is acknowledged only once it is sent itself.
        #expect(await harness.server.received.suffix(6).map { $0.changeSets.compactMap(\.seq) } == [[1, 2], [3, 4], [3], [1, 2], [3, 6], [7]])
        #expect(await noteBodies(harness) == ["SECOND different edit", "after the backup", "one", "three", "two"])
        #expect(await harness.server.snapshotRecords("teams").first?["city"] == "Bath")
        #expect(try await restored.record("notes", id: note)?["body"] == "SECOND different edit")
        try await harness.expectConverged(restored)
    }

    /// A suspect the server refuses as too large even alone, met while probing (its limits were
    /// lowered after the lost copy sent it): dropped with a notification, as outside a search,
    /// and the search goes on past it, instead of the sync failing at that probe every time.
    @Test func aSuspectTooLargeEvenAloneIsDroppedAndTheSearchGoesOn() async throws {
        let harness = try await EngineHarness()
        let team = harness.teamId
        // The backup holds seqs 1 and 2 unsent (2 makes five players); the lost copy sent both, then made seq 3.
        let backup = try await backupOverTakenByLaterChanges(harness) { a in
            _ = try await a.transaction { tx in try tx.create("notes", ["body": "first"]) }
            try await a.transaction { tx in
                for number in 1...5 { _ = try tx.create("players", ["team_id": .integer(team), "number": .integer(Int64(number))]) }
            }
        } afterBackup: { a in
            _ = try await a.transaction { tx in try tx.create("notes", ["body": "after the backup"]) }
        }
        await harness.server.setNamesFirstReusedSeq(false)
        await harness.server.setRequestOperationLimit(4)
        let restored = try SyncEngine(databasePath: backup, transport: harness.server, configuration: harness.configuration())
        try await restored.transaction { tx in try tx.update("teams", id: team, ["city": "Bath"]) }
        #expect(try await restored.pendingChangeSets().map(\.seq) == [1, 2, 3])
        let before = await harness.server.received.count

        let report = try await restored.syncOnce()
        // All three (seven operations) are too many; one at a time, 1 is proven a retry, 2 is too
        // large alone and dropped, 3 is refused as reused and renumbered after the server's 3.
        // The drop restores the request size: 1 and the renumbered 4 go together.
        let sent = await harness.server.received.dropFirst(before).map { $0.changeSets.compactMap(\.seq) }
        #expect(sent == [[1, 2, 3], [1], [2], [3], [1, 4]], "sent \(sent)")
        #expect(report.conflicts.map { $0.seq } == [2])
        #expect(report.conflicts.first?.reason.message.contains("too large") == true)
        #expect(report.acknowledged == [1, 4])
        #expect(report.bootstrapped, "a snapshot undoes the dropped change set's edits")
        #expect(try await restored.pendingChangeSets().isEmpty)
        #expect(await noteBodies(harness) == ["after the backup", "first"], "nothing twice")
        #expect(await harness.server.snapshotRecords("players").count == 5, "the lost copy's players stay")
        #expect(await harness.server.snapshotRecords("teams").first?["city"] == "Bath")
        try await harness.expectConverged(restored)
    }

    @Test func countersMovePastTheServersBeforeTheFirstSyncSoLaterEditsNeverCollide() async throws {
        let harness = try await EngineHarness()
        let backup = try await syncedBackup(harness)
        let asked = await harness.server.deviceInfoRequests

        let restored = try SyncEngine(databasePath: backup, transport: harness.server, configuration: harness.configuration())
        try await restored.syncOnce()
        #expect(await harness.server.deviceInfoRequests == asked + 1)
        let note = try await restored.transaction { tx in try tx.create("notes", ["body": "SECOND different edit"]) }
        #expect(try await restored.pendingChangeSets().map(\.seq) == [4], "after the server's last seq, 3")
        #expect(note == -3, "below the server's lowest temporary id, -2")

        let requestsBefore = await harness.server.received.count
        let report = try await restored.syncOnce()
        #expect(report.acknowledged == [4] && report.requests == 1)
        #expect(await harness.server.received.count == requestsBefore + 1, "no refusal, no probe")
        #expect(await harness.server.deviceInfoRequests == asked + 1, "asked once per engine instance")
        #expect(await noteBodies(harness) == ["SECOND different edit", "after the backup", "first"])
        try await harness.expectConverged(restored)
    }

    @Test func aTokenAdoptedByAnotherFileMovesItsCountersPastTheServers() async throws {
        let harness = try await EngineHarness()
        let a = try await harness.device("a")
        try await a.syncOnce()
        for body in ["one", "two"] {
            try await a.transaction { tx in try tx.create("notes", ["body": .string(body)]) }
        }
        try await a.syncOnce()

        // The app reinstalled and given its old token: an empty file.
        let reinstalled = try SyncEngine(databasePath: nil, transport: harness.server, configuration: harness.configuration())
        let registration = try await harness.server.registration("a")
        try await reinstalled.useToken(registration.token, deviceId: registration.deviceId)
        #expect(await harness.server.deviceInfoRequests == 1)
        try await reinstalled.syncOnce()
        #expect(await harness.server.deviceInfoRequests == 1, "useToken asked already")
        let note = try await reinstalled.transaction { tx in try tx.create("notes", ["body": "SECOND different edit"]) }
        #expect(note == -3)
        #expect(try await reinstalled.pendingChangeSets().map(\.seq) == [3])
        #expect(try await reinstalled.syncOnce().acknowledged == [3])
        #expect(await noteBodies(harness) == ["SECOND different edit", "one", "two"])
        try await harness.expectConverged(reinstalled)
    }

    @Test func aRegisteredDeviceDoesNotAskForCountersItCannotHave() async throws {
        let harness = try await EngineHarness()
        let device = try await harness.device("new")
        try await device.syncOnce()
        #expect(await harness.server.deviceInfoRequests == 0)
    }

    @Test func withoutDevicesMeTheRefusalAloneRepairsTheRestoredDevice() async throws {
        let harness = try await EngineHarness()
        let backup = try await syncedBackup(harness)
        let restored = try SyncEngine(
            databasePath: backup, transport: NoDeviceInfoTransport(base: harness.server), configuration: harness.configuration())
        let team = harness.teamId
        try await restored.transaction { tx in
            let player = try tx.create("players", ["team_id": .integer(team), "number": 7])
            try tx.create("notes", ["player_id": .integer(player), "body": "SECOND different edit"])
        }
        try await restored.transaction { tx in try tx.update("teams", id: team, ["name": "Owls FC"]) }

        let report = try await restored.syncOnce()
        #expect(report.acknowledged == [4, 5])
        #expect(await noteBodies(harness) == ["SECOND different edit", "after the backup", "first"])
        #expect(await harness.server.snapshotRecords("teams").first?["name"] == "Owls FC")
        try await harness.expectConverged(restored)
    }

    @Test func anEditMadeWhileTheFirstCatchUpIsInFlightIsNotTakenForAcknowledged() async throws {
        // GET /devices/me fails (a flaky link), so the restored file does not know the server's
        // counters when the app edits during the first sync's flight: the edit takes seq 2 and
        // temporary id -2, as the lost copy's "after the backup" did, and the answer's catch-up
        // (the request carried nothing) brings that change set back under the same seq.
        let harness = try await EngineHarness()
        let backup = try await syncedBackup(harness)
        let faulty = FaultInjectingTransport(wrapping: harness.server)
        let restored = try SyncEngine(
            databasePath: backup, transport: NoDeviceInfoTransport(base: faulty), configuration: harness.configuration())
        await faulty.setInFlightHook { _ in
            await faulty.setInFlightHook(nil)
            _ = try? await restored.transaction { tx in try tx.create("notes", ["body": "made during the flight"]) }
        }

        let report = try await restored.syncOnce()
        #expect(await faulty.requests.first?.changeSets.isEmpty == true)
        #expect(report.acknowledged == [4], "refused as seq_reused once sent, then renumbered past the server's seqs")
        #expect(await noteBodies(harness) == ["after the backup", "first", "made during the flight"])
        #expect(try await restored.pendingChangeSets().isEmpty)
        try await harness.expectConverged(restored)
    }

    @Test func withoutDevicesMeTheCatchUpOfItsOwnChangeSetsMovesTheCounters() async throws {
        let harness = try await EngineHarness()
        let backup = try await syncedBackup(harness)
        let restored = try SyncEngine(
            databasePath: backup, transport: NoDeviceInfoTransport(base: harness.server), configuration: harness.configuration())
        try await restored.syncOnce()
        // The catch-up held the lost copy's change sets in author form (seqs 2, 3; temporary id -2).
        let note = try await restored.transaction { tx in try tx.create("notes", ["body": "SECOND different edit"]) }
        #expect(note == -3)
        #expect(try await restored.pendingChangeSets().map(\.seq) == [4])
        #expect(try await restored.syncOnce().acknowledged == [4])
        #expect(await noteBodies(harness) == ["SECOND different edit", "after the backup", "first"])
        try await harness.expectConverged(restored)
    }
}
