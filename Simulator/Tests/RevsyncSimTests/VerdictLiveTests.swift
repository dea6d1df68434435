import Foundation
import Logging
import PostgresNIO
import RevsyncDevice
import RevsyncServer
import RevsyncTestSupport
import RevsyncWire
import Synchronization
import Testing

@testable import RevsyncSim

/// The verdict against a real server and PostgreSQL (`withLiveServer`): devices
/// sync through `HTTPSyncTransport`, every check passes, then PostgreSQL is
/// corrupted behind the server's back and the matching check fails.
///
/// Needs PostgreSQL and Redis: `Scripts/stack start` (or `Scripts/test`).
@Suite("Verdict against the live server", .serialized)
struct VerdictLiveTests {
    @Test(.timeLimit(.minutes(3)))
    func everyCheckPassesAfterASyncedRunAndEachCorruptionFailsItsCheck() async throws {
        try await withVerdictDevices { run in
            let (a, b) = (try await run.device("a"), try await run.device("b"))
            let (aId, bId) = (try await run.id(of: a), try await run.id(of: b))
            let team = try await run.seed(on: a)
            try await run.sync(b)

            // A conflict: both update the team from the same revision; B's is stale.
            try await a.transaction { tx in try tx.update("teams", id: team, ["city": "York"]) }
            try await b.transaction { tx in try tx.update("teams", id: team, ["city": "Hull"]) }
            try await run.sync(a)
            let conflicts = try await run.sync(b).conflicts
            #expect(conflicts.map(\.seq) == [1] && conflicts.map(\.reason.code) == [.staleRevision])
            try await run.sync(a)
            try await run.sync(b)

            let gatherer = VerdictGatherer(databaseURL: run.databaseURL)
            let checks = try await gatherer.checks(
                devices: [a, b], acknowledged: run.acknowledged, regressions: [], acknowledgedContent: try await run.acknowledgedContent())
            #expect(checks.map(\.name) == [
                "devices equal PostgreSQL", "lost change sets", "acknowledged content", "duplicate records", "gap-free log",
                "revision regressions", "rejections delivered", "revoked tokens", "liveness",
            ])
            #expect(checks.allSatisfy { $0.passed }, "\(checks)")
            let detail = Dictionary(uniqueKeysWithValues: checks.map { ($0.name, $0.detail) })
            #expect(detail["devices equal PostgreSQL"]?.hasPrefix("2 devices equal to PostgreSQL (13 entities, ") == true)
            #expect(detail["lost change sets"] == "lost 0 of 2 acknowledged")
            #expect(detail["acknowledged content"] == "2 of 2 acknowledged change sets hold what their device sent")
            #expect(detail["revoked tokens"] == "no device revoked")
            #expect(detail["gap-free log"] == "revisions 1…2 present once each")
            #expect(detail["rejections delivered"] == "1 of 1 rejections delivered")
            #expect(detail["liveness"] == "2 of 2 devices at head 2 with nothing pending")

            // A conflict the device no longer holds was not delivered, as far as the verdict can tell.
            let stored = try #require(try await b.storedConflicts().last?.id)
            try await b.dismissConflicts(through: stored)
            var failed = try await run.violations(devices: [a, b])
            #expect(failed.keys.sorted() == ["rejections delivered"])
            #expect(failed["rejections delivered"] == "0 of 1 rejections delivered; not delivered: device \(bId) seq 1 (stale_revision)")

            // A value changed in PostgreSQL: both devices differ, and the record is shown on both sides.
            try await run.sql("UPDATE teams SET name = 'Corrupted' WHERE id = \(team)")
            failed = try await run.violations(devices: [a, b])
            #expect(failed.keys.sorted() == ["devices equal PostgreSQL", "rejections delivered"])
            let equal = try #require(failed["devices equal PostgreSQL"])
            #expect(equal.hasPrefix("2 of 2 devices differ (2 entity digests); first: device \(aId), teams: 1 records on both sides, contents differ; "))
            #expect(equal.contains("teams \(team) differs in name: device {\"id\":\(team),\"revision\":2,\"league_id\":"))
            #expect(equal.contains("\"name\":\"Owls\""))
            #expect(equal.contains("; PostgreSQL {\"id\":\(team),\"revision\":2,") && equal.contains("\"name\":\"Corrupted\""))

            // A copy of A's first log entry at a new head: every record it created now has two.
            let first = try await run.revision(of: aId, seq: 1)
            try await run.sql(
                """
                WITH h AS (UPDATE revsync_head SET head = head + 1 RETURNING head)
                INSERT INTO revsync_log (revision, device_id, seq, body, author_body)
                SELECT h.head, l.device_id, NULL, l.body, l.author_body FROM revsync_log AS l, h WHERE l.revision = \(first)
                """)
            failed = try await run.violations(devices: [a, b])
            #expect(failed.keys.sorted() == ["devices equal PostgreSQL", "duplicate records", "liveness", "rejections delivered"])
            let duplicates = try #require(failed["duplicate records"])
            #expect(duplicates.hasPrefix("\(run.seededRecords) temporary ids made more than one record: device \(aId) "))
            #expect(duplicates.contains("at revisions \(first), 3"))
            #expect(failed["liveness"] == "0 of 2 devices at head 3 with nothing pending; behind: device \(aId) (0 pending, at revision 2); device \(bId) (0 pending, at revision 2)")

            // A log entry that no longer holds what A sent under its seq.
            let second = try await run.revision(of: aId, seq: 2)
            try await run.sql("UPDATE revsync_log SET author_body = replace(author_body, '\"York\"', '\"Hull\"') WHERE revision = \(second)")
            failed = try await run.violations(devices: [a, b])
            #expect(failed.keys.sorted() == ["acknowledged content", "devices equal PostgreSQL", "duplicate records", "liveness", "rejections delivered"])
            #expect(failed["acknowledged content"] == "1 of 2 acknowledged change sets hold what their device sent; differ: "
                + "device \(aId) seq 2 at revision \(second): teams \(team) (\(team)) city: sent \"York\", the entry has \"Hull\"")

            // A log entry removed: a gap, and an acknowledged change set lost.
            try await run.sql("DELETE FROM revsync_log WHERE revision = \(second)")
            failed = try await run.violations(devices: [a, b])
            #expect(failed.keys.sorted() == [
                "acknowledged content", "devices equal PostgreSQL", "duplicate records", "gap-free log", "liveness", "lost change sets",
                "rejections delivered",
            ])
            #expect(failed["gap-free log"] == "revisions 1…3: first missing revision \(second) (1 missing)")
            #expect(failed["lost change sets"] == "lost 1 of 2 acknowledged: device \(aId) seq 2")
            #expect(failed["acknowledged content"]?.hasSuffix("device \(aId) seq 2 at revision \(second): no log entry at revision \(second)") == true)
        }
    }

    @Test(.timeLimit(.minutes(3)))
    func aRevokedDeviceIsLeftOutOfConvergenceAndACommitAfterItsRevocationFails() async throws {
        try await withVerdictDevices { run in
            let (a, b) = (try await run.device("a"), try await run.device("b"))
            let bId = try await run.id(of: b)
            let team = try await run.seed(on: a)
            try await run.sync(b)

            try await DeviceAdmin(baseURL: run.live.baseURL.absoluteString, adminToken: run.live.adminToken).revoke(bId)
            // B keeps editing; its token is refused and nothing of it is committed.
            try await b.transaction { tx in try tx.update("teams", id: team, ["city": "Hull"]) }
            await #expect(throws: SyncTransportError.self) { try await run.sync(b) }
            try await a.transaction { tx in try tx.update("teams", id: team, ["city": "York"]) }
            try await run.sync(a)

            let revoked = [RevokedDevice(device: bId, accepted: 0, refused: 1, other: 0)]
            let checks = try await run.checks(devices: [a, b], revoked: revoked)
            #expect(try await run.violations(devices: [a, b], revoked: revoked).isEmpty, "\(checks)")
            #expect(checks["devices equal PostgreSQL"]?.hasSuffix("; 1 revoked devices not compared") == true)
            #expect(checks["liveness"] == "1 of 1 devices at head 2 with nothing pending")
            #expect(checks["revoked tokens"] == "1 revoked devices: 1 requests refused with 401, none accepted; nothing committed since (1 revoked in PostgreSQL)")

            // Something of B's committed after its revocation.
            try await run.sql(
                """
                WITH h AS (UPDATE revsync_head SET head = head + 1 RETURNING head)
                INSERT INTO revsync_log (revision, device_id, seq, body, author_body)
                SELECT h.head, d.id, NULL, '{"conflict":false,"revision":' || h.head || ',"types":[]}',
                       '{"conflict":false,"revision":' || h.head || ',"types":[]}'
                FROM h, revsync_devices AS d WHERE d.public_id = '\(bId)'::uuid
                """)
            let failed = try await run.violations(devices: [a, b], revoked: revoked)
            #expect(failed.keys.sorted() == ["liveness", "revoked tokens"])
            #expect(failed["revoked tokens"]?.hasPrefix("1 revoked devices have change sets committed since: device \(bId) revoked at ") == true)
            #expect(failed["revoked tokens"]?.hasSuffix(": 1 log entries committed since, first at revision 3") == true)
        }
    }

    @Test(.timeLimit(.minutes(3)))
    func aDeviceRestoredFromAnOlderCopyOfItsFileLosesNoAcknowledgedEdit() async throws {
        try await withVerdictDevices { run in
            var a = try await run.device("a")
            let team = try await run.seed(on: a)
            var copy: DeviceFileCopy?
            a = try await run.reopen(a) { path in copy = try DeviceFileCopy.take(of: path, to: path + ".copy") }

            // After the copy: more seqs and temporary ids used, all acknowledged.
            try await a.transaction { tx in try tx.create("leagues", ["name": "After the copy"]) }
            try await a.transaction { tx in try tx.update("teams", id: team, ["city": "York"]) }
            try await run.sync(a)

            // The old copy back, a new engine with the same token, and a new edit.
            let old = try #require(copy)
            a = try await run.reopen(a) { path in try old.restore(over: path) }
            try await a.transaction { tx in try tx.create("leagues", ["name": "After the restore"]) }
            try await a.transaction { tx in try tx.update("teams", id: team, ["city": "Hull"]) }
            try await run.sync(a)
            try await run.sync(a)

            let checks = try await run.checks(devices: [a])
            #expect(checks.count == 9)
            let failed = try await run.violations(devices: [a])
            #expect(failed.isEmpty, "\(failed)")
            // The seed, the two edits after the copy and the two after the restore, each under its own seq.
            #expect(checks["acknowledged content"] == "5 of 5 acknowledged change sets hold what their device sent")
            #expect(Set(try await run.acknowledgedContent().map(\.seq)).count == 5)
            let leagues = try await a.records(of: "leagues").compactMap { $0.attributes["name"]?.stringValue }
            #expect(leagues.sorted() == ["After the copy", "After the restore", "Premier"])
            #expect(try await a.record("teams", id: team)?.attributes["city"] == "Hull")
        }
    }

    @Test(.timeLimit(.minutes(3)))
    func aPrunedLogStillAccountsForEveryAcknowledgedChangeSet() async throws {
        try await withVerdictDevices { run in
            let a = try await run.device("a")
            _ = try await run.seed(on: a)
            try await a.transaction { tx in try tx.create("leagues", ["name": "Second"]) }
            try await run.sync(a)
            let horizon = try await run.live.server.pruner.pruneOnce()
            #expect(horizon == 2)
            let checks = try await VerdictGatherer(databaseURL: run.databaseURL).checks(
                devices: [a], acknowledged: run.acknowledged, regressions: [RevisionRegression(device: "x", from: 2, to: 1)])
            #expect(checks.filter { !$0.passed }.map(\.name) == ["revision regressions"], "\(checks)")
            #expect(checks.first { $0.name == "lost change sets" }?.detail == "lost 0 of 2 acknowledged")
            #expect(checks.first { $0.name == "gap-free log" }?.detail == "revisions none (head 2) present once each")
        }
    }
}

/// Device engines on SQLite files in a temporary directory, against a live
/// server, with the (device, seq) pairs they saw acknowledged.
final class VerdictRun: Sendable {
    let live: LiveServer
    /// A path, not a `URL`: engines are made from several tasks at once, and a `URL` shared
    /// between threads crashed on release here (its storage's reference count went wrong).
    let directory: String
    private let engines = Mutex<[SyncEngine]>([])
    private let transports = Mutex<[HTTPSyncTransport]>([])
    private let acknowledgedPairs = Mutex<Set<ChangeSetRef>>([])
    /// Each engine's transport and what its acknowledgements answered, by engine.
    private let recording = Mutex<[ObjectIdentifier: (transport: RecordingTransport, path: String)]>([:])
    /// How many records `seed(on:)` creates.
    let seededRecords = 9

    init(live: LiveServer) throws {
        self.live = live
        directory = NSTemporaryDirectory() + "/revsync-verdict-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    }

    var databaseURL: String { live.server.settings.databaseURL }
    var acknowledged: Set<ChangeSetRef> { acknowledgedPairs.withLock { $0 } }

    /// An admin device, registered and bootstrapped.
    func device(_ name: String) async throws -> SyncEngine {
        var configuration = HTTPSyncTransport.Configuration(baseURL: live.baseURL.absoluteString)
        configuration.connectTimeout = .seconds(5)
        configuration.readTimeout = .seconds(30)
        configuration.requestTimeout = .seconds(30)
        configuration.snapshotTimeout = .seconds(30)
        let transport = HTTPSyncTransport(configuration: configuration)
        transports.withLock { $0.append(transport) }
        let recorder = RecordingTransport(base: transport, ledger: AcknowledgementLedger())
        let path = directory + "/\(name).sqlite"
        let engine = try SyncEngine(databasePath: path, transport: recorder)
        engines.withLock { $0.append(engine) }
        recording.withLock { $0[ObjectIdentifier(engine)] = (recorder, path) }
        try await engine.register(DeviceRegistration(name: name, user: name, role: "admin"), adminToken: live.adminToken)
        try await sync(engine)
        return engine
    }

    /// Closes `engine`, runs `whileClosed` on its file, and opens a new engine on the file
    /// with the same transport and ledger, as an app restarted.
    func reopen(_ engine: SyncEngine, whileClosed: (_ path: String) throws -> Void = { _ in }) async throws -> SyncEngine {
        let (recorder, path) = try #require(recording.withLock { $0[ObjectIdentifier(engine)] })
        try await engine.close()
        try whileClosed(path)
        let reopened = try SyncEngine(databasePath: path, transport: recorder)
        engines.withLock { $0.append(reopened) }
        recording.withLock { $0[ObjectIdentifier(reopened)] = (recorder, path) }
        return reopened
    }

    /// What every engine's acknowledgements answered, by content.
    func acknowledgedContent() async throws -> [AcknowledgedChangeSet] {
        var content: Set<AcknowledgedChangeSet> = []
        for engine in engines.withLock({ $0 }) {
            // A closed engine (reopened since) shares its ledger with the open one.
            guard let recorder = recording.withLock({ $0[ObjectIdentifier(engine)]?.transport }), let id = try? await engine.status().deviceId else {
                continue
            }
            content.formUnion(recorder.ledger.acknowledged(by: id).kept)
        }
        return Array(content)
    }

    func id(of engine: SyncEngine) async throws -> String {
        try #require(try await engine.status().deviceId)
    }

    /// Syncs once and keeps the acknowledged pairs.
    @discardableResult
    func sync(_ engine: SyncEngine) async throws -> SyncReport {
        let report = try await engine.syncOnce()
        let id = try await id(of: engine)
        acknowledgedPairs.withLock { $0.formUnion(report.acknowledged.map { ChangeSetRef(device: id, seq: $0) }) }
        return report
    }

    /// One change set of `seededRecords` creates on `engine`, synced; returns the team's server id.
    /// Doubles (an integral one among them) and timestamps in a non-canonical form go through every hop.
    func seed(on engine: SyncEngine) async throws -> Int64 {
        let team = try await engine.transaction { tx in
            let league = try tx.create("leagues", ["name": "Premier", "country": "UK"])
            let team = try tx.create("teams", ["league_id": .integer(league), "name": "Owls", "city": "Leeds"])
            let player = try tx.create("players", ["team_id": .integer(team), "number": 9_007_199_254_740_993])
            let screen = try tx.create("screens", ["team_id": .integer(team), "name": "Fitness", "sort_order": 1])
            let instance = try tx.create(
                "screen_instances", ["screen_id": .integer(screen), "player_id": .integer(player), "date": "2014-02-01T13:15:23.487+01:00"])
            try tx.create("screen_instance_items", ["screen_instance_id": .integer(instance), "numeric_value": 2])
            try tx.create("screen_instance_items", ["screen_instance_id": .integer(instance), "numeric_value": .double(0.1 + 0.2), "text_value": "ünï ✓"])
            let training = try tx.create("trainings", ["team_id": .integer(team), "starts_at": "2024-03-01T18:00:00Z"])
            try tx.create("attendances", ["training_id": .integer(training), "player_id": .integer(player), "present": true])
            return team
        }
        let report = try await sync(engine)
        #expect(report.conflicts.isEmpty && report.acknowledged.count == 1)
        return try #require(try await engine.record("teams", id: team)?.id)
    }

    /// Runs SQL on the server's database, behind the server's back.
    func sql(_ text: String) async throws {
        try await VerdictDatabase.withDatabase(url: databaseURL) { database in
            _ = try await database.client.query(PostgresQuery(unsafeSQL: text)).collect()
        }
    }

    func revision(of device: String, seq: Int64) async throws -> Int64 {
        try await VerdictDatabase.withDatabase(url: databaseURL) { database in
            let rows = try await database.client.query(
                """
                SELECT l.revision FROM revsync_log AS l JOIN revsync_devices AS d ON d.id = l.device_id
                WHERE d.public_id = \(device)::uuid AND l.seq = \(seq)
                """
            ).collect()
            return try #require(try rows.first?.decode(Int64.self))
        }
    }

    /// Every check's detail, by name.
    func checks(devices: [SyncEngine], revoked: [RevokedDevice] = []) async throws -> [String: String] {
        let checks = try await VerdictGatherer(databaseURL: databaseURL).checks(
            devices: devices, acknowledged: acknowledged, regressions: [], acknowledgedContent: try await acknowledgedContent(), revoked: revoked)
        return Dictionary(uniqueKeysWithValues: checks.map { ($0.name, $0.detail) })
    }

    /// The failed checks, by name, with their details.
    func violations(devices: [SyncEngine], revoked: [RevokedDevice] = []) async throws -> [String: String] {
        let checks = try await VerdictGatherer(databaseURL: databaseURL).checks(
            devices: devices, acknowledged: acknowledged, regressions: [], acknowledgedContent: try await acknowledgedContent(), revoked: revoked)
        return Dictionary(uniqueKeysWithValues: checks.filter { !$0.passed }.map { ($0.name, $0.detail) })
    }

    func shutdown() async {
        for engine in engines.withLock({ $0 }) { try? await engine.close() }
        for transport in transports.withLock({ $0 }) { try? await transport.shutdown() }
        try? FileManager.default.removeItem(atPath: directory)
    }
}

/// Runs `body` against a fresh live server, then closes every engine and transport it made.
func withVerdictDevices(_ body: @Sendable (VerdictRun) async throws -> Void) async throws {
    try await withLiveServer { live in
        let run = try VerdictRun(live: live)
        do {
            try await body(run)
        } catch {
            await run.shutdown()
            throw error
        }
        await run.shutdown()
    }
}
