import Foundation
import RevsyncWire
import Synchronization
import Testing

@testable import RevsyncDevice

/// Records the engine's sleeps instead of sleeping.
final class SleepRecorder: Sendable {
    private let delays = Mutex<[Duration]>([])

    var recorded: [Duration] { delays.withLock { $0 } }

    func sleep(_ duration: Duration) async throws {
        delays.withLock { $0.append(duration) }
        try Task.checkCancellation()
        await Task.yield()
    }
}

/// The server's rules in-process (`InMemoryTransport`), seeded with a league and a team, and devices that sync with it.
struct EngineHarness {
    let server: InMemoryTransport
    let sleeps = SleepRecorder()
    let leagueId: Int64
    let teamId: Int64

    /// `schema` holds the devices' permissions (seeding goes through an admin who may do everything).
    init(schema: LocalSchema = TestSchema.schema) async throws {
        server = try await InMemoryTransport(schema: schema)
        let ids = try await server.seed { cs in
            cs.create("leagues", -1, ["name": "Premier"])
            cs.create("teams", -2, ["league_id": -1, "name": "Owls", "city": "Leeds"])
        }
        leagueId = ids[-1] ?? 0
        teamId = ids[-2] ?? 0
    }

    func configuration(maxAttempts: Int? = 8) -> SyncEngineConfiguration {
        var configuration = SyncEngineConfiguration()
        let sleeps = self.sleeps
        configuration.sleep = { try await sleeps.sleep($0) }
        configuration.random = { 0.5 }
        configuration.retry.maxAttempts = maxAttempts
        return configuration
    }

    /// A registered device (not bootstrapped yet).
    func device(
        _ name: String, path: String? = nil, transport: (any SyncTransport)? = nil, maxAttempts: Int? = 8,
        configure: (inout SyncEngineConfiguration) -> Void = { _ in }
    ) async throws -> SyncEngine {
        var configuration = configuration(maxAttempts: maxAttempts)
        configure(&configuration)
        let engine = try SyncEngine(databasePath: path, transport: transport ?? server, configuration: configuration)
        try await engine.register(DeviceRegistration(name: name, user: name, role: "member"), adminToken: server.adminToken)
        return engine
    }

    /// Seeds a team of the harness's league with `players` players, each with a note; returns the team's id.
    func seedTeam(_ name: String, players: Int) async throws -> Int64 {
        let league = leagueId
        let ids = try await server.seed { cs in
            cs.create("teams", -1, ["league_id": .integer(league), "name": .string(name)])
            for number in 1...Int64(players) {
                cs.create("players", -1 - number, ["team_id": -1, "number": .integer(number)])
                cs.create("notes", -10_000 - number, ["player_id": .integer(-1 - number), "body": .string("note \(number)")])
            }
        }
        return try #require(ids[-1])
    }

    /// Expects the device's records to equal the server's, entity by entity, with nothing pending.
    func expectConverged(_ engine: SyncEngine, sourceLocation: SourceLocation = #_sourceLocation) async throws {
        for entity in TestSchema.schema.entities.map(\.name) {
            let local = try await engine.records(entity)
            let remote = await server.snapshotRecords(entity)
            #expect(local == remote, "\(entity) differs", sourceLocation: sourceLocation)
        }
        #expect(try await engine.pendingChangeSets().isEmpty, sourceLocation: sourceLocation)
    }
}

/// A fresh path for a SQLite file in a temporary directory.
func temporaryDatabasePath() throws -> String {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("revsync-device-tests-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    return directory.appendingPathComponent("device.sqlite").path
}

/// Runs `body` once, however often the hook fires.
final class Once: Sendable {
    private let done = Mutex(false)

    func run(_ body: () async throws -> Void) async rethrows {
        let first = done.withLock { done in
            defer { done = true }
            return !done
        }
        if first { try await body() }
    }
}

/// Copies a closed engine's SQLite file, as a backup that a phone's restore brings back.
func copyDatabase(_ source: String, to destination: String) throws {
    for suffix in ["", "-wal", "-shm"] where FileManager.default.fileExists(atPath: source + suffix) {
        try FileManager.default.copyItem(atPath: source + suffix, toPath: destination + suffix)
    }
}

/// A transport whose `GET /devices/me` always fails with `error` (the rest passes
/// through): a device that cannot learn the server's counters in advance.
struct NoDeviceInfoTransport: SyncTransport {
    let base: any SyncTransport
    var error = SyncTransportError.connection("GET /devices/me failed (injected)")

    func sync(_ request: SyncRequest, token: String) async throws -> SyncResponse { try await base.sync(request, token: token) }
    func snapshot(token: String) async throws -> SyncResponse { try await base.snapshot(token: token) }
    func schema(token: String) async throws -> SchemaDocument { try await base.schema(token: token) }
    func register(_ registration: DeviceRegistration, adminToken: String) async throws -> RegisteredDevice {
        try await base.register(registration, adminToken: adminToken)
    }
    func device(token: String) async throws -> DeviceInfo { throw error }
}
