import RevsyncWire
import Testing

@testable import RevsyncDevice

/// The server's operation limits: per change set (`invalid`) and per request
/// (`413`), which the engine keeps to before the server has to refuse.
@Suite("Operation limits")
struct OperationLimitTests {
    @Test func aTransactionOverTheChangeSetLimitIsRefusedAndLeavesNoTrace() async throws {
        let harness = try await EngineHarness()
        let squad = try await harness.seedTeam("Larks", players: 8)
        let device = try await harness.device("a") { $0.maxOperationsPerChangeSet = 5 }
        try await device.syncOnce()
        let team = harness.teamId

        await #expect(throws: DeviceError.tooManyOperations(count: 6, limit: 5)) {
            try await device.transaction { tx in
                for number in 1...6 { try tx.create("players", ["team_id": .integer(team), "number": .integer(Int64(number))]) }
            }
        }
        #expect(try await device.pendingChangeSets().isEmpty)
        #expect(try await device.records("players", matching: RecordQuery().where("team_id", .equal, .integer(team))).isEmpty)

        let created = try await device.transaction { tx in
            try (1...5).map { number in try tx.create("players", ["team_id": .integer(team), "number": .integer(Int64(number))]) }
        }
        #expect(created.first == -1, "the refused transaction used no temporary id")
        // A delete is one operation, however many records it cascades to.
        try await device.transaction { tx in try tx.delete("teams", id: squad) }
        let report = try await device.syncOnce()
        #expect(report.acknowledged == [1, 2])
        try await harness.expectConverged(device)
    }

    /// A change set too large to ever be taken (a photo stored in a string, say) is refused
    /// at the transaction, leaving no trace: queued, every request carrying it would be refused
    /// as 413, even alone, and every change set behind it would wait for good.
    @Test func aTransactionOverTheByteLimitIsRefusedAndLeavesNoTrace() async throws {
        let harness = try await EngineHarness()
        let device = try await harness.device("a") { $0.maxChangeSetBytes = 2_000 }
        try await device.syncOnce()
        await #expect {
            try await device.transaction { tx in try tx.create("leagues", ["name": .string(String(repeating: "p", count: 3_000))]) }
        } throws: { error in
            guard case DeviceError.changeSetTooManyBytes(let bytes, let limit) = error else { return false }
            return bytes > 3_000 && limit == 2_000 && "\(error)".contains("at most 2000")
        }
        #expect(try await device.pendingChangeSets().isEmpty)
        #expect(try await device.records("leagues", matching: RecordQuery()).allSatisfy { $0.id > 0 }, "the refused record was kept")
        let created = try await device.transaction { tx in try tx.create("leagues", ["name": .string(String(repeating: "p", count: 1_000))]) }
        #expect(created == -1, "the refused transaction used no temporary id")
        let report = try await device.syncOnce()
        #expect(report.acknowledged == [1])
        try await harness.expectConverged(device)
    }

    @Test func requestsStayUnderTheOperationLimitSoTheServerNeedNotRefuseThem() async throws {
        let harness = try await EngineHarness()
        let device = try await harness.device("a") { $0.maxOperationsPerRequest = 7 }
        try await device.syncOnce()
        let team = harness.teamId
        for round in 0..<5 {
            try await device.transaction { tx in
                for number in 1...3 { try tx.create("players", ["team_id": .integer(team), "number": .integer(Int64(round * 3 + number))]) }
            }
        }
        await harness.server.setRequestOperationLimit(7)
        let before = await harness.server.received.count

        let report = try await device.syncOnce()
        #expect(report.acknowledged == [1, 2, 3, 4, 5])
        #expect(report.retries == 0)
        let sent = await harness.server.received.dropFirst(before)
        #expect(sent.map(\.changeSets.count) == [2, 2, 1])
        #expect(sent.allSatisfy { $0.changeSets.reduce(0) { $0 + $1.operationCount } <= 7 })
        try await harness.expectConverged(device)
    }

    @Test func aServerWithALowerLimitRejectsTheChangeSetAsInvalid() async throws {
        let harness = try await EngineHarness()
        await harness.server.setChangeSetOperationLimit(4)
        let device = try await harness.device("a")
        try await device.syncOnce()
        let team = harness.teamId
        let created = try await device.transaction { tx in
            try (1...5).map { number in try tx.create("players", ["team_id": .integer(team), "number": .integer(Int64(number))]) }
        }
        try await device.transaction { tx in try tx.update("teams", id: team, ["city": "York"]) }

        let report = try await device.syncOnce()
        #expect(report.conflicts.map(\.reason.code) == [.invalid])
        #expect(report.conflicts.first?.dropped["players"]?.sorted() == created.sorted())
        #expect(report.acknowledged == [2])
        #expect(try await device.records("players").isEmpty)
        try await harness.expectConverged(device)
    }

    /// A device whose change set limits are above the server's request limits: a change set the
    /// server refuses as `413` even alone is dropped with a notification instead of holding every
    /// later one back, and a snapshot undoes its edits.
    @Test func aChangeSetTheServerRefusesAsTooLargeEvenAloneIsDroppedAndTheRestGoThrough() async throws {
        let harness = try await EngineHarness()
        await harness.server.setRequestOperationLimit(4)
        let device = try await harness.device("a")
        try await device.syncOnce()
        let team = harness.teamId
        let conflicts = device.conflicts()
        try await device.transaction { tx in try tx.update("teams", id: team, ["city": "Leeds"]) }
        try await device.transaction { tx in
            for number in 1...5 { _ = try tx.create("players", ["team_id": .integer(team), "number": .integer(Int64(number))]) }
        }
        try await device.transaction { tx in try tx.update("teams", id: team, ["city": "York"]) }
        let queued = try await device.pendingChangeSets()[1]
        let snapshots = await harness.server.snapshotRequests
        let before = await harness.server.received.count

        let report = try await device.syncOnce()
        #expect(report.acknowledged == [1, 2], "the third took the dropped one's seq")
        #expect(await harness.server.received.dropFirst(before).map(\.changeSets.count) == [3, 1, 1, 1])
        let conflict = try #require(report.conflicts.first)
        #expect(report.conflicts.count == 1)
        #expect(conflict.seq == 2)
        #expect(conflict.resync)
        #expect(conflict.reason.code == .invalid)
        #expect(conflict.reason.message.contains("too large"))
        #expect(conflict.rejected == queued)
        #expect(report.bootstrapped)
        #expect(await harness.server.snapshotRequests == snapshots + 1)
        #expect(try await device.records("players").isEmpty, "the snapshot undid its creates")
        #expect(try await device.record("teams", id: team)?["city"] == "York")
        #expect(try await device.storedConflicts().map(\.seq) == [2])
        try await harness.expectConverged(device)

        // The device carries on with the next seq.
        try await device.transaction { tx in try tx.update("teams", id: team, ["city": "Hull"]) }
        #expect(try await device.syncOnce().acknowledged == [3])
        try await harness.expectConverged(device)
        try await device.close()
        #expect(await conflicts.reduce(into: []) { $0.append($1.seq) } == [2])
    }

    /// A 413 that is not the server's own answer (a proxy's limit) drops nothing: the proxy is
    /// what to mend, and the change set stays pending.
    @Test func aProxysTooLargeForALoneChangeSetIsThrownAndDropsNothing() async throws {
        let harness = try await EngineHarness()
        let transport = FaultInjectingTransport(wrapping: harness.server)
        let device = try await harness.device("a", transport: transport)
        try await device.syncOnce()
        try await device.transaction { tx in try tx.update("teams", id: harness.teamId, ["city": "York"]) }
        await transport.inject(.failBeforeSending(.tooLarge(message: "<html>413</html>", byServer: false)))
        let error = await #expect(throws: SyncTransportError.self) { try await device.syncOnce() }
        #expect(error == .tooLarge(message: "<html>413</html>", byServer: false))
        #expect(try await device.pendingChangeSets().map(\.seq) == [1])
        #expect(try await device.storedConflicts().isEmpty)
        #expect(try await device.syncOnce().acknowledged == [1], "sent once the proxy lets it through")
        try await harness.expectConverged(device)
    }
}
