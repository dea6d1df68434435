import AsyncHTTPClient
import Foundation
import Logging
import NIOPosix
import RevsyncHarness
import RevsyncRules
import RevsyncServer

/// `--snapshot`: `GET /snapshot` as JSON and as the SQLite snapshot file, side by side, against
/// a release `revsync serve` child process on a fresh database, so that the server's memory
/// and CPU can be read from /proc. For each size, with a server of its own so that its peak is
/// that size's:
///
/// 1. The dataset, seeded with SQL (``SnapshotSeed``) before the server starts.
/// 2. The server's build: the first SQLite request waits for it; the time to that answer's
///    headers, and the server's peak resident size before and at that moment.
/// 3. The answers' sizes, plain and gzip, of both kinds.
/// 4. A new device bootstrapping from each, each in a process of its own
///    (``DeviceBootstrapProcess``), the SQLite one once the file is built, so that it measures
///    the device and not the build.
/// 5. At the first size, on a fresh server of the same database (which adopts the file built
///    in 2): clients that stop reading after the first bytes of an answer
///    (``SlowSnapshotReaders``), the SQLite file's and then the JSON snapshot's, and the
///    server's resident size before, while they hold their connections, and once they closed,
///    in two rounds of the same clients (see `SlowReaderFigures.Kind`).
struct SnapshotBench {
    struct Options {
        var sizes = [100_000, 1_000_000]
        /// Clients of step 5 for each kind, each its own device; 0 skips the step.
        var slowReaders = 50
        var server = ""
        /// How long any one step may wait: the server's build, an answer, a device's bootstrap.
        var stepTimeout: Duration = .seconds(600)
    }

    /// The PostgreSQL server: a database `revsync_bench` is made afresh there for each size,
    /// and dropped at the end. No Redis: the snapshot is read from PostgreSQL alone, so the
    /// servers run without their cache and the stack's Redis is left as it is.
    let serverURL: String
    let options: Options
    let logger: Logger

    func run() async throws -> SnapshotReport {
        // Before any seeding, which takes a while at a million records.
        guard FileManager.default.isExecutableFile(atPath: options.server) else {
            throw BenchError("the server executable \(options.server) does not exist: build it with `swift build -c release --product revsync`, or name it with --server")
        }
        let schemaPath = ProcessInfo.processInfo.environment["REVSYNC_SCHEMA"]
            ?? URL(fileURLWithPath: FileManager.default.currentDirectoryPath).appendingPathComponent("Config/schema.json").path
        let schema = try SchemaLoader.load(data: try Data(contentsOf: URL(fileURLWithPath: schemaPath)), file: schemaPath)
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("revsync-bench-snapshot-\(ProcessInfo.processInfo.processIdentifier)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        print("snapshot: sizes \(options.sizes.map(SnapshotReport.count).joined(separator: ", ")); server \(options.server); files in \(directory)")

        var configuration = HTTPClient.Configuration()
        // The answers' sizes are read as sent.
        configuration.decompression = .disabled
        let http = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
        var sizes: [SnapshotSizeFigures] = []
        var failure: (any Error)?
        do {
            for records in options.sizes {
                sizes.append(try await measure(records: records, schema: schema, schemaPath: schemaPath, http: http, directory: directory))
            }
        } catch {
            failure = error
        }
        try? await http.shutdown()
        // At a million records the database holds some hundreds of MB.
        try? await SQL.run(on: serverURL, "DROP DATABASE IF EXISTS revsync_bench WITH (FORCE)", logger: logger)
        if let failure {
            print("snapshot: the logs stay in \(directory)")
            throw failure
        }
        try? FileManager.default.removeItem(atPath: directory)
        return SnapshotReport(
            machine: Machine.describe(), date: ISO8601DateFormatter().string(from: Date()), server: options.server, sizes: sizes)
    }

    /// One size, on a database and a server of its own.
    private func measure(records: Int, schema: DatasetSchema, schemaPath: String, http: HTTPClient, directory: String) async throws -> SnapshotSizeFigures {
        let label = SnapshotReport.count(records)
        let files = SizeFiles(directory: directory + "/\(records)")
        try FileManager.default.createDirectory(atPath: files.snapshots, withIntermediateDirectories: true)
        // Whatever happens, only the logs stay: the files are as large as the dataset.
        defer { files.removeLargeFiles() }

        let databaseURL = try await freshDatabase()
        try await migrate(databaseURL, schemaPath: schemaPath)
        let seed = try SnapshotSeed(schema: schema, records: records)
        print("\(label): seeding …")
        let seedSeconds = try await ContinuousClock().measure { try await seed.write(to: databaseURL, logger: logger) }.inSeconds

        let environment = [
            "REVSYNC_DATABASE_URL": databaseURL,
            "REVSYNC_REDIS_URL": "off",
            "REVSYNC_ADMIN_TOKEN": Bench.adminToken,
            "REVSYNC_SCHEMA": schemaPath,
            // In the bench's directory rather than the server's own under /tmp, so that a server
            // that does not get to stop cleanly leaves nothing behind.
            "REVSYNC_SNAPSHOT_DIR": files.snapshots,
        ]
        let server = try ServerProcess(executable: options.server, port: try FreePort.kernelChosenPort(), environment: environment, logPath: files.serverLog)
        var figures: SnapshotSizeFigures
        do {
            figures = try await measure(server: server, seed: seed, seedSeconds: seedSeconds, http: http, files: files)
            await server.stop()
        } catch {
            await server.stop()
            throw error
        }
        guard options.slowReaders > 0, records == options.sizes.first else { return figures }
        let fresh = try ServerProcess(executable: options.server, port: try FreePort.kernelChosenPort(), environment: environment, logPath: files.serverLog)
        do {
            figures.slowReaders = try await measureSlowReaders(server: fresh, http: http, label: label)
            await fresh.stop()
        } catch {
            await fresh.stop()
            throw error
        }
        return figures
    }

    /// Step 5: what clients that stop reading make the server hold.
    private func measureSlowReaders(server: ServerProcess, http: HTTPClient, label: String) async throws -> SlowReaderFigures {
        try await server.waitUntilReady(http: http, timeout: options.stepTimeout)
        let client = BenchClient(http: http, port: server.port)
        let count = options.slowReaders
        var tokens: [String] = []
        for index in 0..<(2 * count) {
            // A device each: the server lets one device have only a few snapshots under way.
            tokens.append(try await client.register("slow-reader-\(index)", role: "viewer", adminToken: Bench.adminToken))
        }
        // Settling after each step: the server's writes fill the kernel's buffers and then wait.
        let settle = Duration.seconds(2)
        func held(_ kind: SnapshotAnswer.Kind, tokens: ArraySlice<String>) async throws -> SlowReaderFigures.Kind {
            print("\(label): \(count) clients stop reading the \(kind.rawValue) snapshot after its first \(SlowSnapshotReaders.firstBytes) bytes, twice …")
            // Twice: the first round's figure counts what its answers leave behind besides the
            // readers (the JSON spools' writes, the allocator's arenas growing), the second's
            // reuses that memory and may count less than the readers hold.
            func round() async throws -> (before: Int, holding: Int) {
                let before = try ProcessReadings.residentBytes(server.pid)
                let readers = try await SlowSnapshotReaders.open(
                    port: server.port, tokens: Array(tokens), kind: kind, timeout: options.stepTimeout, group: MultiThreadedEventLoopGroup.singleton)
                let holding: Int
                do {
                    try await Task.sleep(for: settle)
                    try server.checkRunning()
                    holding = try ProcessReadings.residentBytes(server.pid)
                } catch {
                    await readers.close()
                    throw error
                }
                await readers.close()
                try await Task.sleep(for: settle)
                return (before, holding)
            }
            let first = try await round()
            let second = try await round()
            return SlowReaderFigures.Kind(
                readers: tokens.count, firstBefore: first.before, firstHolding: first.holding,
                secondBefore: second.before, secondHolding: second.holding, after: try ProcessReadings.residentBytes(server.pid))
        }
        // The file first: sending it allocates nothing but the chunks, while the JSON spool's
        // write leaves memory of its own behind.
        let sqlite = try await held(.sqlite, tokens: tokens[0..<count])
        let json = try await held(.json, tokens: tokens[count...])
        return SlowReaderFigures(sqlite: sqlite, json: json)
    }

    private func measure(server: ServerProcess, seed: SnapshotSeed, seedSeconds: Double, http: HTTPClient, files: SizeFiles) async throws -> SnapshotSizeFigures {
        let label = SnapshotReport.count(seed.records)
        let timeout = options.stepTimeout
        try await server.waitUntilReady(http: http, timeout: timeout)
        let client = BenchClient(http: http, port: server.port)
        let reader = try await client.register("snapshot-reader", role: "viewer", adminToken: Bench.adminToken)
        let jsonToken = try await client.register("snapshot-json", role: "viewer", adminToken: Bench.adminToken)
        let sqliteToken = try await client.register("snapshot-sqlite", role: "viewer", adminToken: Bench.adminToken)

        func fetch(_ kind: SnapshotAnswer.Kind, gzip: Bool) async throws -> (answer: SnapshotAnswer, atHeaders: ServerReading) {
            try await SnapshotAnswer.fetch(
                http: http, baseURL: server.baseURL, token: reader, kind: kind, gzip: gzip, timeout: timeout,
                atHeaders: { try ServerReading(server.pid) })
        }

        // The server has served requests and built nothing yet.
        let before = try ServerReading(server.pid)
        print("\(label): building the SQLite snapshot file (the first request waits for it) …")
        let (sqlitePlain, built) = try await fetch(.sqlite, gzip: false)
        let (sqliteGzip, _) = try await fetch(.sqlite, gzip: true)
        guard sqlitePlain.revision == Int64(seed.records), sqliteGzip.revision == sqlitePlain.revision else {
            throw BenchError("the SQLite snapshot answers are at revisions \(sqlitePlain.revision ?? -1) and \(sqliteGzip.revision ?? -1), the head is \(seed.records)")
        }
        print("\(label): the JSON snapshot, plain and gzip …")
        let (jsonPlain, _) = try await fetch(.json, gzip: false)
        let (jsonGzip, _) = try await fetch(.json, gzip: true)
        let afterAnswers = try ServerReading(server.pid)

        var devices: [DeviceBootstrap.Result] = []
        for (mode, token) in [(DeviceBootstrap.Mode.json, jsonToken), (.sqlite, sqliteToken)] {
            print("\(label): a new device bootstraps from the \(mode.rawValue) snapshot, in a process of its own …")
            let device = try await DeviceBootstrapProcess.run(
                url: server.baseURL, token: token, mode: mode, path: files.device(mode), logPath: files.deviceLog(mode), timeout: timeout)
            guard device.loaded == mode.rawValue else {
                throw BenchError("the device set to load the \(mode.rawValue) snapshot loaded \(device.loaded) (its log: \(files.deviceLog(mode)))")
            }
            guard device.records == seed.records, device.maxRevision == Int64(seed.records) else {
                throw BenchError("the \(mode.rawValue) device holds \(device.records) records at revision \(device.maxRevision), the server \(seed.records) at \(seed.records)")
            }
            devices.append(device)
        }
        try server.checkRunning()
        let end = try ServerReading(server.pid)
        return SnapshotSizeFigures(
            records: seed.records, counts: Dictionary(uniqueKeysWithValues: seed.counts.map { ($0.entity, $0.count) }), seedSeconds: seedSeconds,
            revision: sqlitePlain.revision ?? 0, buildSeconds: sqlitePlain.headersSeconds,
            serverBefore: before, serverBuilt: built, serverAfterAnswers: afterAnswers, serverEnd: end,
            sqlite: AnswerFigures(plain: sqlitePlain, gzip: sqliteGzip), json: AnswerFigures(plain: jsonPlain, gzip: jsonGzip),
            jsonDevice: devices[0], sqliteDevice: devices[1])
    }

    /// Drops and creates the database `revsync_bench`, as `Bench.freshDatabase` does, without
    /// touching Redis; returns its URL.
    private func freshDatabase() async throws -> String {
        guard var components = URLComponents(string: serverURL) else { throw BenchError("bad database URL \(serverURL)") }
        components.path = "/revsync_bench"
        try await SQL.run(on: serverURL, "DROP DATABASE IF EXISTS revsync_bench WITH (FORCE)", logger: logger)
        try await SQL.run(on: serverURL, "CREATE DATABASE revsync_bench", logger: logger)
        return components.string ?? serverURL
    }

    /// Creates the server's tables in the new database, as `revsync migrate` would.
    private func migrate(_ databaseURL: String, schemaPath: String) async throws {
        var settings = ServerSettings()
        settings.databaseURL = databaseURL
        settings.schemaPath = schemaPath
        settings.redisURL = nil
        let server = try Server(settings: settings, logger: logger)
        _ = try await withRunning(server.postgresService) { try await server.migrator.migrate() }
    }
}

/// Where one size's files go: the server's snapshot directory, the devices' files, the logs.
struct SizeFiles {
    let directory: String

    var snapshots: String { directory + "/snapshots" }
    var serverLog: String { directory + "/server.log" }
    func device(_ mode: DeviceBootstrap.Mode) -> String { directory + "/device-\(mode.rawValue).sqlite" }
    func deviceLog(_ mode: DeviceBootstrap.Mode) -> String { directory + "/device-\(mode.rawValue).log" }

    /// Everything but the logs.
    func removeLargeFiles() {
        try? FileManager.default.removeItem(atPath: snapshots)
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        for name in names where name.hasPrefix("device-") && !name.hasSuffix(".log") && !name.hasSuffix(".log.out") {
            try? FileManager.default.removeItem(atPath: directory + "/" + name)
        }
    }
}

/// The server process's memory and CPU at one moment.
struct ServerReading: Codable {
    /// `VmHWM`: the peak since the process started.
    let peakResidentBytes: Int
    let residentBytes: Int
    /// User and system CPU since the process started.
    let cpuSeconds: Double

    init(_ pid: Int32) throws {
        peakResidentBytes = try ProcessReadings.peakResidentBytes(pid)
        residentBytes = try ProcessReadings.residentBytes(pid)
        cpuSeconds = Double(try ProcessReadings.cpuTicks(pid)) / Double(ProcessReadings.ticksPerSecond)
    }
}
