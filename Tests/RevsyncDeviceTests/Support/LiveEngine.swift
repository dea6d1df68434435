import Foundation
import RevsyncServer
import RevsyncTestSupport
import RevsyncWire
import Synchronization
import Testing

@testable import RevsyncDevice

/// Device engines over real SQLite files, talking HTTP to a real server
/// (`withLiveServer`: Hummingbird, PostgreSQL, the Redis cache), for the
/// integration tests in LiveServerTests.swift.
///
/// Every engine and transport made here is closed by `withLiveDevices`, whether
/// the test passes or throws; the SQLite files live in a temporary directory
/// that is removed at the end.
final class LiveDevices: Sendable {
    let live: LiveServer
    /// A path, not a `URL`: engines are made from several tasks at once, and a `URL` shared
    /// between threads crashed on release here (its storage's reference count went wrong).
    let directory: String
    let sleeps = SleepRecorder()
    private let engines = Mutex<[SyncEngine]>([])
    private let transports = Mutex<[HTTPSyncTransport]>([])

    init(live: LiveServer) throws {
        self.live = live
        directory = NSTemporaryDirectory() + "/revsync-live-devices-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    }

    var baseURL: String { live.baseURL.absoluteString }
    var adminToken: String { live.adminToken }

    /// A path for a device's SQLite file.
    func path(_ name: String) -> String { directory + "/\(name).sqlite" }

    /// An HTTP transport to the live server (short timeouts: everything is local), closed at the end.
    func transport(to baseURL: String? = nil, _ adjust: (inout HTTPSyncTransport.Configuration) -> Void = { _ in }) -> HTTPSyncTransport {
        var configuration = HTTPSyncTransport.Configuration(baseURL: baseURL ?? self.baseURL)
        configuration.connectTimeout = .seconds(2)
        configuration.readTimeout = .seconds(20)
        configuration.requestTimeout = .seconds(20)
        configuration.snapshotTimeout = .seconds(20)
        adjust(&configuration)
        let transport = HTTPSyncTransport(configuration: configuration)
        transports.withLock { $0.append(transport) }
        return transport
    }

    /// Fast backoff: sleeps are recorded, not slept.
    func configuration(maxAttempts: Int? = 8) -> SyncEngineConfiguration {
        var configuration = SyncEngineConfiguration()
        let sleeps = self.sleeps
        configuration.sleep = { try await sleeps.sleep($0) }
        configuration.random = { 0.5 }
        configuration.retry.maxAttempts = maxAttempts
        return configuration
    }

    /// Opens an engine on `name`'s SQLite file (no registration), closed at the end
    /// unless `tracked` is false (a test that drops it, as a crash would).
    func open(
        _ name: String, transport: (any SyncTransport)? = nil, maxAttempts: Int? = 8, configuration: SyncEngineConfiguration? = nil,
        tracked: Bool = true
    ) throws -> SyncEngine {
        let engine = try SyncEngine(
            databasePath: path(name), transport: transport ?? self.transport(),
            configuration: configuration ?? self.configuration(maxAttempts: maxAttempts))
        if tracked { engines.withLock { $0.append(engine) } }
        return engine
    }

    /// A device registered through the engine (`POST /devices` with the admin
    /// token), on its own SQLite file; not bootstrapped yet.
    func device(
        _ name: String, role: String = "member", transport: (any SyncTransport)? = nil, maxAttempts: Int? = 8,
        configuration: SyncEngineConfiguration? = nil, tracked: Bool = true
    ) async throws -> SyncEngine {
        let engine = try open(name, transport: transport, maxAttempts: maxAttempts, configuration: configuration, tracked: tracked)
        try await engine.register(DeviceRegistration(name: name, user: name, role: role), adminToken: adminToken)
        return engine
    }

    /// A device registered and bootstrapped from `/snapshot`.
    func bootstrapped(_ name: String, role: String = "member", transport: (any SyncTransport)? = nil) async throws -> SyncEngine {
        let engine = try await device(name, role: role, transport: transport)
        let report = try await engine.syncOnce()
        #expect(report.bootstrapped)
        return engine
    }

    /// A device token of `role`, registered without an engine.
    func token(_ name: String, role: String) async throws -> RegisteredDevice {
        try await transport().register(DeviceRegistration(name: name, user: name, role: role), adminToken: adminToken)
    }

    // MARK: The server's truth

    /// The server's records, read from a raw `GET /snapshot` with a viewer token
    /// (not through the engine's snapshot loader), by entity and in id order;
    /// attributes completed and numbers normalized as a device stores them.
    func serverRecords() async throws -> [String: [DeviceRecord]] {
        let viewer = try await token("truth-\(UUID().uuidString.prefix(8))", role: "viewer")
        let transport = self.transport()
        let schema = try LocalSchema(try await transport.schema(token: viewer.token))
        let snapshot = try await transport.snapshot(token: viewer.token)
        var result: [String: [DeviceRecord]] = [:]
        for entity in schema.document.entities { result[entity.name] = [] }
        for changeSet in snapshot.changeSets {
            for entity in changeSet.types {
                guard let changes = changeSet.entities[entity] else { continue }
                for id in changes.create + changes.update {
                    let values = changes.attributes[id] ?? [:]
                    let revision = try #require(values[ReservedAttribute.revision]?.integerValue, "\(entity) \(id) has no revision")
                    result[entity, default: []].append(
                        DeviceRecord(id: id, revision: revision, attributes: schema.completeAttributes(values, of: entity)))
                }
            }
        }
        for entity in result.keys { result[entity]?.sort { $0.id < $1.id } }
        return result
    }

    /// The server's records of one entity.
    func serverRecords(_ entity: String) async throws -> [DeviceRecord] {
        try await serverRecords()[entity] ?? []
    }

    /// Every record of every entity on `engine`.
    func localRecords(_ engine: SyncEngine) async throws -> [String: [DeviceRecord]] {
        let schema = try #require(await engine.schema)
        var result: [String: [DeviceRecord]] = [:]
        for entity in schema.document.entities.map(\.name) { result[entity] = try await engine.records(entity) }
        return result
    }

    /// Expects each engine to hold exactly the server's records (per entity: the
    /// same ids, attributes and revisions), with nothing pending.
    func expectConverged(_ engines: SyncEngine..., sourceLocation: SourceLocation = #_sourceLocation) async throws {
        let truth = try await serverRecords()
        for (index, engine) in engines.enumerated() {
            let local = try await localRecords(engine)
            #expect(Set(local.keys) == Set(truth.keys), "device \(index): entities differ", sourceLocation: sourceLocation)
            for entity in truth.keys.sorted() {
                let mine = local[entity] ?? []
                let theirs = truth[entity] ?? []
                if mine != theirs {
                    Issue.record(
                        "device \(index): \(entity) differs from the server\n device: \(mine)\n server: \(theirs)",
                        sourceLocation: sourceLocation)
                }
            }
            #expect(try await engine.pendingChangeSets().isEmpty, "device \(index) has pending change sets", sourceLocation: sourceLocation)
        }
    }

    // MARK: Seed data

    /// Data made by an admin device (members may not create leagues or teams):
    /// a league, a team, a player, a screen with two items, a screen instance with
    /// two values, a training with an attendance, and a note.
    struct Seed: Sendable {
        var league: Int64
        var team: Int64
        var player: Int64
        var screen: Int64
        var screenItems: [Int64]
        var instance: Int64
        var instanceItems: [Int64]
        var training: Int64
        var attendance: Int64
        var note: Int64
    }

    func seed() async throws -> Seed {
        let admin = try await bootstrapped("seed-admin", role: "admin")
        let temporary = try await admin.transaction { tx in
            let league = try tx.create("leagues", ["name": "Premier", "country": "UK"])
            let team = try tx.create("teams", ["league_id": .integer(league), "name": "Owls", "city": "Leeds"])
            let user = try tx.create("users", ["first_name": "Sam", "last_name": "Stone"])
            let player = try tx.create("players", ["team_id": .integer(team), "user_id": .integer(user), "number": 7])
            let screen = try tx.create("screens", ["team_id": .integer(team), "name": "Fitness", "sort_order": 1])
            let items = [
                try tx.create("screen_items", ["screen_id": .integer(screen), "label": "Sprint", "kind": "numeric", "sort_order": 1]),
                try tx.create("screen_items", ["screen_id": .integer(screen), "label": "Jump", "kind": "numeric", "sort_order": 2]),
            ]
            let instance = try tx.create(
                "screen_instances", ["screen_id": .integer(screen), "player_id": .integer(player), "date": "2014-02-01 13:15:23.487+01"])
            let values = [
                try tx.create(
                    "screen_instance_items",
                    ["screen_instance_id": .integer(instance), "screen_item_id": .integer(items[0]), "numeric_value": 2]),
                try tx.create(
                    "screen_instance_items",
                    ["screen_instance_id": .integer(instance), "screen_item_id": .integer(items[1]), "numeric_value": 5.5]),
            ]
            let training = try tx.create("trainings", ["team_id": .integer(team), "starts_at": "2024-03-01T18:00:00Z", "location": "Pitch 2"])
            let attendance = try tx.create("attendances", ["training_id": .integer(training), "player_id": .integer(player), "present": true])
            let note = try tx.create("notes", ["player_id": .integer(player), "author_id": .integer(user), "body": "fast", "pinned": false])
            return Seed(
                league: league, team: team, player: player, screen: screen, screenItems: items, instance: instance,
                instanceItems: values, training: training, attendance: attendance, note: note)
        }
        let report = try await admin.syncOnce()
        #expect(report.acknowledged == [1] && report.conflicts.isEmpty)
        func permanent(_ entity: String, _ id: Int64) async throws -> Int64 {
            let record = try #require(try await admin.record(entity, id: id))
            #expect(record.id > 0)
            return record.id
        }
        return Seed(
            league: try await permanent("leagues", temporary.league),
            team: try await permanent("teams", temporary.team),
            player: try await permanent("players", temporary.player),
            screen: try await permanent("screens", temporary.screen),
            screenItems: [
                try await permanent("screen_items", temporary.screenItems[0]), try await permanent("screen_items", temporary.screenItems[1]),
            ],
            instance: try await permanent("screen_instances", temporary.instance),
            instanceItems: [
                try await permanent("screen_instance_items", temporary.instanceItems[0]),
                try await permanent("screen_instance_items", temporary.instanceItems[1]),
            ],
            training: try await permanent("trainings", temporary.training),
            attendance: try await permanent("attendances", temporary.attendance),
            note: try await permanent("notes", temporary.note))
    }

    // MARK: Closing

    func shutdown() async {
        for engine in engines.withLock({ $0 }) { try? await engine.close() }
        for transport in transports.withLock({ $0 }) { try? await transport.shutdown() }
        try? FileManager.default.removeItem(atPath: directory)
    }
}

/// Runs `body` against a fresh real server, then closes every engine and transport it made.
func withLiveDevices(
    configure: (inout ServerSettings) -> Void = { _ in }, _ body: @Sendable (LiveDevices) async throws -> Void
) async throws {
    try await withLiveServer(configure: configure) { live in
        let devices = try LiveDevices(live: live)
        do {
            try await body(devices)
        } catch {
            await devices.shutdown()
            throw error
        }
        await devices.shutdown()
    }
}

/// Collects the notifications an engine publishes on `conflicts()` from the
/// moment it is made.
final class ConflictCollector: Sendable {
    private let received = Mutex<[ConflictNotification]>([])

    /// The stream ends when the engine closes, and the collecting task with it.
    init(_ engine: SyncEngine) {
        let stream = engine.conflicts()
        Task {
            for await conflict in stream { self.append(conflict) }
        }
    }

    private func append(_ conflict: ConflictNotification) {
        received.withLock { $0.append(conflict) }
    }

    var notifications: [ConflictNotification] { received.withLock { $0 } }

    /// The notifications once there are at least `count` (waiting up to five seconds).
    func awaitNotifications(_ count: Int = 1, sourceLocation: SourceLocation = #_sourceLocation) async throws -> [ConflictNotification] {
        try await waitUntil({ self.notifications.count >= count }, sourceLocation: sourceLocation)
        return notifications
    }
}
