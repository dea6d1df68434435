import Foundation
import Logging
import RevsyncDevice
import RevsyncSnapshotFile
import RevsyncWire
import Synchronization

/// One new device's `bootstrap()` over HTTP into a new SQLite file, as the snapshot bench's
/// child process runs it (`revsync-bench bootstrap-device`): alone in its process, so that
/// the peak resident size is the bootstrap's and nothing of the bench's.
struct DeviceBootstrap {
    /// Which snapshot the engine is set to load.
    enum Mode: String, Codable, CaseIterable {
        /// `sqliteSnapshots` off: the JSON snapshot.
        case json
        /// `sqliteSnapshots` on (the default): the SQLite snapshot file.
        case sqlite
    }

    /// What the child prints, as one JSON line on stdout.
    struct Result: Codable {
        let mode: Mode
        /// Which snapshot the engine says it loaded: `sqlite`, `json`, or `unknown`. The engine
        /// falls back to JSON by itself when the server offers no file that fits.
        let loaded: String
        /// `bootstrap()`: the schema, the snapshot's download, and loading it.
        let seconds: Double
        /// Records in the device's file afterwards, counted through the engine.
        let records: Int
        let maxRevision: Int64
        /// `VmRSS` once the engine is open, just before `bootstrap()`.
        let residentBytesBefore: Int
        /// `VmHWM` after `bootstrap()`: the process's peak while it ran.
        let peakResidentBytes: Int
        /// Whether the peak could be reset before `bootstrap()`; if not, the peak counts the process's start too.
        let peakReset: Bool
        /// Body bytes of the `GET /snapshot` answers as received (gzip), and the requests `bootstrap()` made.
        let snapshotWireBytes: Int
        let requests: Int
        /// The device's SQLite file once closed, and its write-ahead log beside it (0 when gone).
        let databaseBytes: Int
        let walBytes: Int
    }

    let url: String
    let token: String
    let mode: Mode
    let path: String

    /// The page of records read at once when counting them, after the measurement.
    static let countPage = 50_000

    func run() async throws -> Result {
        guard !FileManager.default.fileExists(atPath: path) else { throw BenchError("\(path) exists: a bootstrap is measured on a new file") }
        let capture = LogCapture()
        let exchanges = Mutex<[HTTPExchange]>([])
        var transportConfiguration = HTTPSyncTransport.Configuration(baseURL: url)
        // stdout carries only the result line.
        transportConfiguration.logger = Self.stderrLogger("revsync.device.http")
        transportConfiguration.observer = { exchange in exchanges.withLock { $0.append(exchange) } }
        let transport = HTTPSyncTransport(configuration: transportConfiguration)
        var configuration = SyncEngineConfiguration()
        configuration.sqliteSnapshots = mode == .sqlite
        configuration.logger = capture.logger(label: "revsync.device")
        // A failure is reported, not retried: a retry's backoff would be counted as the bootstrap's time.
        configuration.retry.maxAttempts = 1

        let engine: SyncEngine
        do {
            engine = try SyncEngine(databasePath: path, transport: transport, configuration: configuration)
        } catch {
            try? await transport.shutdown()
            throw error
        }
        let measured: Result
        do {
            try await engine.useToken(token)
            let before = try ProcessReadings.ownResidentBytes()
            let peakReset = ProcessReadings.resetPeak()
            let earlier = exchanges.withLock { $0.count }
            let began = ContinuousClock.now
            try await engine.bootstrap()
            let seconds = (ContinuousClock.now - began).inSeconds
            let peak = try ProcessReadings.ownPeakResidentBytes()
            let made = exchanges.withLock { Array($0.dropFirst(earlier)) }
            // Counted after the readings: paging through a million records costs memory of its own.
            let records = try await Self.countRecords(engine)
            let status = try await engine.status()
            try await engine.close()
            measured = Result(
                mode: mode, loaded: Self.loaded(capture.captured), seconds: seconds, records: records, maxRevision: status.maxRevision,
                residentBytesBefore: before, peakResidentBytes: peak, peakReset: peakReset,
                snapshotWireBytes: made.filter { $0.path == "/snapshot" }.map(\.responseWireBytes).reduce(0, +), requests: made.count,
                databaseBytes: fileSize(atPath: path) ?? 0, walBytes: fileSize(atPath: path + "-wal") ?? 0)
        } catch {
            try? await engine.close()
            try? await transport.shutdown()
            throw error
        }
        try await transport.shutdown()
        return measured
    }

    /// Which snapshot the engine's log says it loaded.
    static func loaded(_ lines: [LogCapture.Line]) -> String {
        // SyncEngine+Bootstrap.swift: "bootstrapped from snapshot file" (SQLite), "bootstrapped from snapshot" (JSON).
        if lines.contains(where: { $0.message == "bootstrapped from snapshot file" }) { return Mode.sqlite.rawValue }
        if lines.contains(where: { $0.message == "bootstrapped from snapshot" }) { return Mode.json.rawValue }
        return "unknown"
    }

    /// Every record of every entity, a page at a time in id order.
    static func countRecords(_ engine: SyncEngine) async throws -> Int {
        guard let schema = await engine.schema else { throw BenchError("the engine has no schema after bootstrap()") }
        var total = 0
        for entity in schema.entities {
            var after: Int64 = .min
            while true {
                let page = try await engine.records(entity.name, matching: RecordQuery().where("id", .greater, .integer(after)).limited(to: countPage))
                total += page.count
                guard page.count == countPage, let last = page.last else { break }
                after = last.id
            }
        }
        return total
    }

    static func stderrLogger(_ label: String) -> Logger {
        var logger = Logger(label: label) { StreamLogHandler.standardError(label: $0) }
        logger.logLevel = .warning
        return logger
    }
}
