import Foundation
import RevsyncServer
import RevsyncTestSupport
import RevsyncWire
import Synchronization
import Testing

@testable import RevsyncDevice

/// Which snapshot a device loaded, and a way to spoil the files it downloads.
final class SnapshotCounts: Sendable {
    let files = Mutex(0)
    let json = Mutex(0)
    /// Downloads still to spoil (cut to half their size after the digest was checked,
    /// as a disk or a bad server file would).
    let spoil = Mutex(0)
}

struct CountingTransport: SyncTransport {
    let base: any SyncTransport
    let counts: SnapshotCounts
    /// Added to the schema's version, so that the device's differs from the file's.
    var schemaVersionShift = 0

    func sync(_ request: SyncRequest, token: String) async throws -> SyncResponse { try await base.sync(request, token: token) }
    func snapshot(token: String) async throws -> SyncResponse {
        counts.json.withLock { $0 += 1 }
        return try await base.snapshot(token: token)
    }
    func schema(token: String) async throws -> SchemaDocument {
        var document = try await base.schema(token: token)
        document.version += schemaVersionShift
        return document
    }
    func register(_ registration: DeviceRegistration, adminToken: String) async throws -> RegisteredDevice {
        try await base.register(registration, adminToken: adminToken)
    }
    func device(token: String) async throws -> DeviceInfo { try await base.device(token: token) }
    func snapshotFile(token: String, to path: String, minimumRevision: Int64) async throws -> SnapshotFileDownload? {
        guard let download = try await base.snapshotFile(token: token, to: path, minimumRevision: minimumRevision) else { return nil }
        counts.files.withLock { $0 += 1 }
        let spoil = counts.spoil.withLock { count in
            defer { count = max(0, count - 1) }
            return count > 0
        }
        if spoil, let handle = FileHandle(forUpdatingAtPath: path) {
            try handle.truncate(atOffset: UInt64(download.bytes / 2))
            try handle.close()
        }
        return download
    }
}

@Suite("Bootstrapping from the SQLite snapshot", .serialized)
struct SnapshotFileBootstrapTests {
    // Three minutes, as in LiveServerTests: the whole suite's load, not this test, sets its time.
    @Test(.timeLimit(.minutes(3)))
    func aNewDeviceLoadsTheFileAndAResyncKeepsItsPendingEdits() async throws {
        try await withLiveDevices { devices in
            let seed = try await devices.seed()
            // The file the seed's first device made is of the empty dataset: one at the head.
            let head = try await devices.live.server.rebuildSnapshotFile()
            let counts = SnapshotCounts()
            let device = try await devices.device("file", transport: CountingTransport(base: devices.transport(), counts: counts))
            let report = try await device.syncOnce()
            #expect(report.bootstrapped && report.maxRevision == head)
            #expect(counts.files.withLock { $0 } == 1 && counts.json.withLock { $0 } == 0)
            try await devices.expectConverged(device)

            // Offline edits, then a re-bootstrap (as after a resync): the file replaces the
            // records and the pending edits are replayed on top, still to be sent.
            try await device.transaction { tx in try tx.update("teams", id: seed.team, ["city": "Bath"]) }
            try await device.bootstrap()
            #expect(counts.files.withLock { $0 } == 2)
            #expect(try await device.record("teams", id: seed.team)?["city"] == "Bath")
            #expect(try await device.pendingChangeSets().count == 1)
            try await device.syncOnce()
            try await devices.expectConverged(device)
            #expect(try await devices.serverRecords("teams").first { $0.id == seed.team }?["city"] == "Bath")

            // Now past the file: a re-bootstrap loads the JSON snapshot rather than go back in time.
            try await device.bootstrap()
            #expect(counts.files.withLock { $0 } == 2 && counts.json.withLock { $0 } == 1)
            try await devices.expectConverged(device)
        }
    }

    @Test(.timeLimit(.minutes(3)))
    func aCutDownloadResumesWithARangeRequest() async throws {
        try await withLiveDevices { devices in
            _ = try await devices.seed()
            let token = try await devices.token("resumer", role: "member").token
            let transport = devices.transport { $0.acceptGzip = false }
            let whole = try #require(try await transport.snapshotFile(token: token, to: devices.path("whole.snapshot"), minimumRevision: 0))
            #expect(!whole.resumed && whole.receivedBytes == whole.bytes)
            let bytes = try Data(contentsOf: URL(fileURLWithPath: whole.path))

            // What a download cut half-way leaves beside the device's file.
            let target = devices.path("cut.snapshot")
            let half = bytes.count / 2
            FileManager.default.createFile(atPath: target + ".part", contents: bytes.prefix(half))
            try PartialSnapshot(etag: whole.etag, gzip: false, digest: whole.digest, revision: whole.revision, schemaVersion: whole.schemaVersion)
                .write(to: target + ".part.json")
            let resumed = try #require(try await transport.snapshotFile(token: token, to: target, minimumRevision: 0))
            #expect(resumed.resumed)
            #expect(resumed.receivedBytes == bytes.count - half)
            #expect(resumed.digest == whole.digest)
            #expect(try Data(contentsOf: URL(fileURLWithPath: target)) == bytes)
            #expect(!FileManager.default.fileExists(atPath: target + ".part"))
            #expect(!FileManager.default.fileExists(atPath: target + ".part.json"))

            // Bytes spoilt before the cut: the whole no longer matches the server's SHA-256,
            // everything is dropped, and the next call starts again from the first byte.
            let spoilt = devices.path("spoilt.snapshot")
            var prefix = bytes.prefix(half)
            prefix[prefix.startIndex + 100] ^= 0xFF
            FileManager.default.createFile(atPath: spoilt + ".part", contents: prefix)
            try PartialSnapshot(etag: whole.etag, gzip: false, digest: whole.digest, revision: whole.revision, schemaVersion: whole.schemaVersion)
                .write(to: spoilt + ".part.json")
            await #expect(throws: SyncTransportError.self) { _ = try await transport.snapshotFile(token: token, to: spoilt, minimumRevision: 0) }
            for suffix in ["", ".part", ".part.json", ".checking"] { #expect(!FileManager.default.fileExists(atPath: spoilt + suffix)) }
            let again = try #require(try await transport.snapshotFile(token: token, to: spoilt, minimumRevision: 0))
            #expect(!again.resumed && again.digest == whole.digest)
        }
    }

    @Test(.timeLimit(.minutes(3)))
    func aFileThatDoesNotCheckOutLeavesTheDeviceAsItWasAndIsFetchedAgain() async throws {
        try await withLiveDevices { devices in
            let seed = try await devices.seed()
            _ = try await devices.live.server.rebuildSnapshotFile()
            let counts = SnapshotCounts()
            let device = try await devices.device(
                "careful", transport: CountingTransport(base: devices.transport(), counts: counts), maxAttempts: 2)
            try await device.syncOnce()
            let before = try await devices.localRecords(device)

            // Both attempts get a spoilt file: the bootstrap fails, nothing changed, the device works.
            counts.spoil.withLock { $0 = 2 }
            await #expect(throws: SyncTransportError.self) { try await device.bootstrap() }
            #expect(try await devices.localRecords(device) == before)
            try await device.transaction { tx in try tx.update("teams", id: seed.team, ["city": "Hull"]) }
            #expect(try await device.record("teams", id: seed.team)?["city"] == "Hull")

            // One spoilt, then a good one: the retry loads it.
            counts.spoil.withLock { $0 = 1 }
            let loadedBefore = counts.files.withLock { $0 }
            try await device.bootstrap()
            #expect(counts.files.withLock { $0 } == loadedBefore + 2)
            #expect(try await device.record("teams", id: seed.team)?["city"] == "Hull", "the pending edit stays on top")
            try await device.syncOnce()
            try await devices.expectConverged(device)
        }
    }

    @Test(.timeLimit(.minutes(3)))
    func aFileForAnotherSchemaVersionFallsBackToTheJSONSnapshot() async throws {
        try await withLiveDevices { devices in
            _ = try await devices.seed()
            let counts = SnapshotCounts()
            let device = try await devices.device(
                "older", transport: CountingTransport(base: devices.transport(), counts: counts, schemaVersionShift: 1))
            #expect(try await device.syncOnce().bootstrapped)
            #expect(counts.files.withLock { $0 } == 1, "downloaded, then refused")
            #expect(counts.json.withLock { $0 } == 1)
            try await devices.expectConverged(device)
        }
    }
}
