import Foundation
import NIOCore
import RevsyncGzip
import RevsyncWire
import Testing

@testable import RevsyncDevice

/// Not a test: the figure for the closing note. Bootstraps a new device over HTTP
/// (gzip) from a 100,000-record snapshot of the default schema into a SQLite file.
/// Run alone (the peak memory is the process's), twice (the first run generates
/// the snapshot file), and without Swift Testing's backtrace capture of thrown
/// errors, as the earlier figures were (`JSONValue`'s decoding threw internally
/// and the capture dominated the time, before the transport read answers with
/// `SyncResponseReader`):
///
///     SWT_SWIFT_ERROR_BACKTRACING_ENABLED=0 REVSYNC_DEVICE_BENCHMARK=1 \
///         swift test -c release -Xswiftc -enable-testing --filter BootstrapBenchmark
@Suite("Bootstrap benchmark", .enabled(if: ProcessInfo.processInfo.environment["REVSYNC_DEVICE_BENCHMARK"] != nil))
struct BootstrapBenchmark {
    /// `Config/schema.json` (the server's format) as a device sees it.
    struct ConfigSchema: Decodable {
        struct Entity: Decodable {
            var name: String
            var attributes: [AttributeDescription]
        }
        var version: Int
        var entities: [Entity]
    }

    static let counts: [String: Int] = [
        "leagues": 10, "seasons": 50, "teams": 200, "users": 10_000, "players": 10_000, "screens": 1_000,
        "screen_items": 10_000, "screen_instances": 20_000, "screen_instance_items": 38_740, "matches": 2_000,
        "trainings": 2_000, "attendances": 5_000, "notes": 1_000,
    ]

    @Test func bootstrapFromAHundredThousandRecords() async throws {
        let configURL = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Config/schema.json")
        let config = try JSONDecoder().decode(ConfigSchema.self, from: Data(contentsOf: configURL))
        let document = SchemaDocument(
            version: config.version,
            entities: config.entities.map { EntityDescription(name: $0.name, attributes: $0.attributes, permissions: .all) })
        // The snapshot is generated once and kept, so that a second run starts with a
        // small heap and the peak below is the bootstrap's own.
        let cache = FileManager.default.temporaryDirectory.appendingPathComponent("revsync-benchmark-snapshot-v1.json.gz")
        let generated = !FileManager.default.fileExists(atPath: cache.path)
        if generated {
            try Data(try Self.makeSnapshot(document)).write(to: cache)
        }
        let snapshotGzip = Array(try Data(contentsOf: cache))
        let total = Self.counts.values.reduce(0, +)
        let schemaBody = Array(try JSONEncoder().encode(document))

        let server = try MiniHTTPServer { request in
            switch request.path {
            case "/schema": .init(status: 200, body: schemaBody)
            case "/snapshot": .init(status: 200, headers: [("Content-Encoding", "gzip")], body: snapshotGzip)
            default: .init(status: 200, body: Array(#"{"maxRevision":\#(total),"changeSets":[]}"#.utf8))
            }
        }
        defer { server.stop() }
        let transport = HTTPSyncTransport(configuration: .init(baseURL: server.baseURL))
        let path = try temporaryDatabasePath()
        let engine = try SyncEngine(databasePath: path, transport: transport)
        try await engine.useToken("bench")

        let rssBefore = Self.memoryStatus("VmRSS")
        let resetPeak = Self.resetPeakMemory()
        let clock = ContinuousClock()
        let elapsed = try await clock.measure { try await engine.bootstrap() }
        let peak = Self.memoryStatus("VmHWM")
        let stored = try await engine.records("screen_instance_items", matching: RecordQuery().limited(to: 1)).count
        let fetch = try await clock.measure { _ = try await transport.snapshot(token: "bench") }
        var plain: [UInt8] = []
        let gunzip = try clock.measure { plain = Array(try Gzip.inflate(ByteBuffer(bytes: snapshotGzip), maxSize: 1 << 30).readableBytesView) }
        let decode = try clock.measure { _ = try JSONDecoder().decode(SyncResponse.self, from: Data(plain)) }
        try await engine.close()
        try await transport.shutdown()
        let fileSize = (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? Int) ?? 0

        print("""
            BENCHMARK bootstrap: \(total) records, snapshot \(snapshotGzip.count / 1_000) kB gzip
            BENCHMARK time: \(elapsed) in all (schema + snapshot over HTTP, gunzip, JSON decode, SQLite load in one transaction); \
            of which \(fetch) for the snapshot's download, gunzip and decode \
            (gunzip alone \(gunzip), JSON decode alone \(decode), \(plain.count / 1_000_000) MB of JSON)
            BENCHMARK memory: RSS before \(rssBefore / 1024) MB, peak during bootstrap \(peak / 1024) MB \
            (peak reset: \(resetPeak); snapshot generated in this run: \(generated) — if true, run again for a clean figure)
            BENCHMARK database file: \(fileSize / 1_000_000) MB
            """)
        #expect(stored == 1)
    }

    static func makeSnapshot(_ document: SchemaDocument) throws -> [UInt8] {
        var changeSet = ChangeSet()
        var nextId: [String: Int64] = [:]
        for entity in document.entities {
            let count = counts[entity.name] ?? 100
            for index in 0..<count {
                var values: Attributes = ["revision": .integer(Int64(1 + index % 1000))]
                for attribute in entity.attributes {
                    values[attribute.name] = value(for: attribute, index: index)
                }
                let id = (nextId[entity.name] ?? 0) + 1
                nextId[entity.name] = id
                changeSet.create(entity.name, id, values)
            }
        }
        let plain = Array(try JSONEncoder().encode(SyncResponse(maxRevision: 1000, changeSets: [changeSet])))
        return Array(Gzip.deflate(ByteBuffer(bytes: plain)).readableBytesView)
    }

    static func value(for attribute: AttributeDescription, index: Int) -> JSONValue {
        if let target = attribute.references {
            return .integer(Int64(1 + index % (counts[target] ?? 100)))
        }
        switch attribute.type {
        case .string: return .string("\(attribute.name) value \(index)")
        case .integer: return .integer(Int64(index % 97))
        case .double: return .double(Double(index) / 7)
        case .boolean: return .bool(index % 2 == 0)
        case .timestamp: return .string(Timestamp(microseconds: 1_400_000_000_000_000 + Int64(index) * 60_000_000).canonical)
        }
    }

    /// A line of /proc/self/status in kB (0 where there is none).
    static func memoryStatus(_ key: String) -> Int {
        guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return 0 }
        for line in status.split(separator: "\n") where line.hasPrefix(key + ":") {
            return Int(line.split(separator: " ").dropFirst().first ?? "0") ?? 0
        }
        return 0
    }

    /// Resets the peak resident size (Linux: `5` to /proc/self/clear_refs).
    static func resetPeakMemory() -> Bool {
        (try? "5".write(toFile: "/proc/self/clear_refs", atomically: false, encoding: .utf8)) != nil
    }
}
