import Foundation
import RevsyncWire
import Testing

@testable import RevsyncDevice

/// Corrective sets too large to send: the server answers `"resync": true` with no
/// records, and the engine drops the rejected change set and loads a snapshot.
@Suite("Resync correctives")
struct ResyncTests {
    /// Members may create and update players but not delete them, so deleting a
    /// team (allowed) is forbidden as soon as it would cascade into a player.
    static let memberSchema: LocalSchema = {
        let players = Permissions(create: true, update: true, delete: false)
        do { return try LocalSchema(TestSchema.document(playerPermissions: players)) } catch { fatalError("member schema: \(error)") }
    }()

    /// A corrective-set budget (`REVSYNC_MAX_CORRECTIVE_BYTES`) of about ten records of this
    /// schema: a team with two players and their notes fits, a team with twelve does not.
    static let tenRecords = 1_000

    /// A member's app that lets it try what its role may not do (see `checksPermissionsLocally`).
    static func trying(_ configuration: inout SyncEngineConfiguration) {
        configuration.checksPermissionsLocally = false
    }

    @Test func aForbiddenDeleteWhoseRepairIsTooLargeIsUndoneByASnapshot() async throws {
        let harness = try await EngineHarness(schema: Self.memberSchema)
        let squad = try await harness.seedTeam("Larks", players: 30)
        await harness.server.setMaxCorrectiveBytes(Self.tenRecords)
        let a = try await harness.device("a", configure: Self.trying)
        try await a.syncOnce()
        #expect(try await a.records("players").count == 30)
        let conflicts = a.conflicts()
        let events = a.changes()

        try await a.transaction { tx in try tx.update("leagues", id: harness.leagueId, ["country": "UK"]) }
        try await a.transaction { tx in try tx.delete("teams", id: squad) }
        try await a.transaction { tx in try tx.update("teams", id: harness.teamId, ["city": "York"]) }
        #expect(try await a.records("players").isEmpty, "the delete cascades locally")
        #expect(try await a.records("notes").isEmpty)
        let queued = try await a.pendingChangeSets()[1]
        let snapshots = await harness.server.snapshotRequests

        let report = try await a.syncOnce()
        #expect(report.acknowledged == [1, 3], "the other pending change sets go through")
        #expect(report.bootstrapped)
        #expect(await harness.server.snapshotRequests == snapshots + 1)
        #expect(report.conflicts.count == 1)
        let conflict = try #require(report.conflicts.first)
        #expect(conflict.seq == 2)
        #expect(conflict.resync)
        #expect(conflict.reason.code == .forbidden)
        #expect(conflict.reason.message.contains("GET /snapshot"))
        #expect(conflict.rejected == queued, "the change set as it was queued")
        #expect(conflict.restored.isEmpty && conflict.dropped.isEmpty)
        #expect(try await a.records("players").count == 30, "the snapshot brings every player back")
        #expect(try await a.records("notes").count == 30)
        #expect(try await a.record("teams", id: squad)?["name"] == "Larks")
        #expect(try await a.record("leagues", id: harness.leagueId)?["country"] == "UK")
        #expect(try await a.status().maxRevision == report.maxRevision)
        try await harness.expectConverged(a)

        #expect(try await a.storedConflicts().map(\.resync) == [true])

        // The device carries on as usual.
        let player = try #require(try await a.records("players").first)
        try await a.transaction { tx in try tx.update("players", id: player.id, ["number": 99]) }
        let next = try await a.syncOnce()
        #expect(next.acknowledged == [4])
        #expect(next.conflicts.isEmpty && !next.bootstrapped)
        #expect(await harness.server.snapshotRecords("players").first { $0.id == player.id }?["number"] == 99)
        try await harness.expectConverged(a)

        // Closing ends the streams: what they delivered can be read whole.
        try await a.close()
        #expect(await conflicts.reduce(into: []) { $0.append($1.seq) } == [2])
        let origins = await events.reduce(into: [ChangeEvent.Origin]()) { $0.append($1.origin) }
        #expect(origins.prefix(5) == [.local(seq: 1), .local(seq: 2), .local(seq: 3), .sync, .bootstrap], "the snapshot follows the response")
    }

    @Test func severalResyncCorrectivesInOneResponseLoadOneSnapshot() async throws {
        let harness = try await EngineHarness(schema: Self.memberSchema)
        let larks = try await harness.seedTeam("Larks", players: 12)
        let rooks = try await harness.seedTeam("Rooks", players: 12)
        await harness.server.setMaxCorrectiveBytes(Self.tenRecords)
        let a = try await harness.device("a", configure: Self.trying)
        let b = try await harness.device("b")
        try await a.syncOnce()
        try await b.syncOnce()

        try await a.transaction { tx in try tx.delete("teams", id: larks) }
        try await a.transaction { tx in try tx.delete("teams", id: rooks) }
        let user = try await a.transaction { tx in try tx.create("users", ["first_name": "Ana"]) }
        try await b.transaction { tx in try tx.update("teams", id: harness.teamId, ["city": "Hull"]) }
        try await b.syncOnce()
        let snapshots = await harness.server.snapshotRequests

        let report = try await a.syncOnce()
        #expect(report.conflicts.map(\.seq) == [1, 2])
        #expect(report.conflicts.map(\.resync) == [true, true])
        #expect(report.acknowledged == [3])
        #expect(await harness.server.snapshotRequests == snapshots + 1, "one snapshot repairs both")
        #expect(try await a.records("players").count == 24)
        #expect(try await a.record("teams", id: harness.teamId)?["city"] == "Hull")
        #expect(try await a.record("teams", id: rooks) != nil)
        #expect(try await a.record("users", id: user)?.id ?? 0 > 0)
        try await b.syncOnce()
        try await harness.expectConverged(a)
        try await harness.expectConverged(b)
    }

    @Test func aResyncInterruptedBeforeItsSnapshotIsFinishedByTheNextSync() async throws {
        let harness = try await EngineHarness(schema: Self.memberSchema)
        let squad = try await harness.seedTeam("Larks", players: 12)
        await harness.server.setMaxCorrectiveBytes(Self.tenRecords)
        let path = try temporaryDatabasePath()
        let transport = SnapshotFailingTransport(base: harness.server)
        let a = try await harness.device("a", path: path, transport: transport, maxAttempts: 1, configure: Self.trying)
        try await a.syncOnce()
        try await a.transaction { tx in try tx.delete("teams", id: squad) }

        await transport.setFailing(true)
        await #expect(throws: SyncTransportError.self) { try await a.syncOnce() }
        #expect(try await a.pendingChangeSets().isEmpty, "the rejected change set left the outbox with the response")
        #expect(try await a.storedConflicts().map(\.resync) == [true])
        #expect(try await a.records("players").isEmpty, "not repaired until a snapshot loads")
        try await a.close()

        // Reopened (as after the app was stopped), the engine loads the snapshot first.
        var configuration = harness.configuration()
        Self.trying(&configuration)
        let reopened = try SyncEngine(databasePath: path, transport: harness.server, configuration: configuration)
        let report = try await reopened.syncOnce()
        #expect(report.bootstrapped)
        #expect(report.conflicts.isEmpty)
        #expect(try await reopened.records("players").count == 12)
        #expect(try await reopened.record("teams", id: squad) != nil)
        try await harness.expectConverged(reopened)
        #expect(try await !reopened.syncOnce().bootstrapped, "once loaded, the resync is done")
    }

    @Test func aSmallRepairIsStillSentAsRecords() async throws {
        let harness = try await EngineHarness(schema: Self.memberSchema)
        let squad = try await harness.seedTeam("Larks", players: 2)
        await harness.server.setMaxCorrectiveBytes(Self.tenRecords)
        let a = try await harness.device("a", configure: Self.trying)
        try await a.syncOnce()
        try await a.transaction { tx in try tx.delete("teams", id: squad) }
        let snapshots = await harness.server.snapshotRequests

        let report = try await a.syncOnce()
        let conflict = try #require(report.conflicts.first)
        #expect(!conflict.resync)
        #expect(!report.bootstrapped)
        #expect(await harness.server.snapshotRequests == snapshots)
        #expect(conflict.restored["players"]?.count == 2)
        #expect(conflict.restored["notes"]?.count == 2, "the corrective follows the cascade down")
        try await harness.expectConverged(a)
    }
}

/// A transport whose `GET /snapshot` fails while `failing` is set (the rest passes through).
actor SnapshotFailingTransport: SyncTransport {
    let base: any SyncTransport
    private var failing = false

    init(base: any SyncTransport) {
        self.base = base
    }

    func setFailing(_ failing: Bool) { self.failing = failing }

    func snapshot(token: String) async throws -> SyncResponse {
        if failing { throw SyncTransportError.connection("GET /snapshot failed (injected)") }
        return try await base.snapshot(token: token)
    }

    func sync(_ request: SyncRequest, token: String) async throws -> SyncResponse { try await base.sync(request, token: token) }
    func schema(token: String) async throws -> SchemaDocument { try await base.schema(token: token) }
    func register(_ registration: DeviceRegistration, adminToken: String) async throws -> RegisteredDevice {
        try await base.register(registration, adminToken: adminToken)
    }
    func device(token: String) async throws -> DeviceInfo { try await base.device(token: token) }
}
