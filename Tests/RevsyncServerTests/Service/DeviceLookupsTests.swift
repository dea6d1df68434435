import Crypto
import RevsyncRules
import RevsyncTestSupport
import RevsyncWire
import Synchronization
import Testing
@testable import RevsyncServer

/// `DeviceLookups`: tokens the cache does not hold, looked up in batches by one task.
@Suite(.timeLimit(.minutes(1))) struct DeviceLookupsTests {
    /// The in-memory directory, counting the batch look-ups and their sizes.
    final class CountingDirectory: DeviceDirectory {
        let dataset: InMemoryDataset
        let batches = Mutex<[Int]>([])

        init(_ dataset: InMemoryDataset) { self.dataset = dataset }

        func insert(name: String, user: String, role: String, tokenHash: [UInt8]) async throws -> Device {
            try await dataset.insert(name: name, user: user, role: role, tokenHash: tokenHash)
        }
        func find(tokenHash: [UInt8]) async throws -> DeviceRow? { try await dataset.find(tokenHash: tokenHash) }
        func find(tokenHashes: [[UInt8]]) async throws -> [[UInt8]: DeviceRow] {
            batches.withLock { $0.append(tokenHashes.count) }
            var rows: [[UInt8]: DeviceRow] = [:]
            for hash in tokenHashes { rows[hash] = try await dataset.find(tokenHash: hash) }
            return rows
        }
        func info(_ device: Device) async throws -> DeviceInfo { try await dataset.info(device) }
        func list() async throws -> [DeviceInfo] { try await dataset.list() }
        func revoke(publicId: String) async throws -> Bool { try await dataset.revoke(publicId: publicId) }
        func replaceToken(publicId: String, tokenHash: [UInt8]) async throws -> Bool {
            try await dataset.replaceToken(publicId: publicId, tokenHash: tokenHash)
        }
        func setRole(publicId: String, role: String) async throws -> DeviceInfo? { try await dataset.setRole(publicId: publicId, role: role) }
        func markSeen(_ ids: [Int64]) async throws { try await dataset.markSeen(ids) }
    }

    final class Answers: Sendable {
        let value = Mutex<[Int64: String]>([:])
    }

    static func hash(_ token: String) -> [UInt8] { Array(SHA256.hash(data: Array(token.utf8))) }

    static func directory() -> CountingDirectory {
        CountingDirectory(InMemoryDataset(schema: ServiceHarness.schema))
    }

    /// 300 requests missing the cache at once: two queries (256, then 44), each request its own device.
    @Test func requestsWaitingTogetherAreAskedForInBatches() async throws {
        let directory = Self.directory()
        var devices: [(token: String, id: Int64)] = []
        for index in 0..<300 {
            let token = "token-\(index)"
            devices.append((token, try await directory.insert(name: "d\(index)", user: "u", role: "member", tokenHash: Self.hash(token)).id))
        }
        let lookups = DeviceLookups(directory: directory, cache: DeviceCache())
        try await withThrowingTaskGroup(of: Void.self) { group in
            let answers = Answers()
            var asking: [Task<Void, any Error>] = []
            for device in devices {
                asking.append(Task {
                    let found = try await lookups.device(Self.hash(device.token), generation: 0)
                    answers.value.withLock { $0[found?.id ?? -1] = device.token }
                })
            }
            // All wait before the service starts: it finds them together.
            try await eventually { lookups.waitingCount == 300 }
            group.addTask { try await lookups.run() }
            for task in asking { try await task.value }
            #expect(directory.batches.withLock { $0 } == [DeviceLookups.batchSize, 300 - DeviceLookups.batchSize])
            #expect(answers.value.withLock { $0 } == Dictionary(uniqueKeysWithValues: devices.map { ($0.id, $0.token) }))
            group.cancelAll()
        }
    }

    /// An unknown token is nil, a revoked device's throws; the cache learns both.
    @Test func unknownAndRevokedTokensAnswerAsTheDirectoryDoes() async throws {
        let directory = Self.directory()
        let revoked = try await directory.insert(name: "gone", user: "u", role: "member", tokenHash: Self.hash("revoked"))
        _ = try await directory.revoke(publicId: revoked.publicId)
        let cache = DeviceCache()
        let lookups = DeviceLookups(directory: directory, cache: cache)
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await lookups.run() }
            let unknown = try await lookups.device(Self.hash("unknown"), generation: 0)
            #expect(unknown == nil)
            await #expect(throws: SyncRefusal.self) { try await lookups.device(Self.hash("revoked"), generation: 0) }
            if case .unknown = await cache.lookup(Self.hash("unknown")) {} else { Issue.record("the cache did not learn the unknown token") }
            group.cancelAll()
        }
    }

    /// Once the service has stopped, a look-up is refused at once (503), never left waiting.
    @Test func aLookUpAfterTheServiceStoppedIsRefused() async throws {
        let lookups = DeviceLookups(directory: Self.directory(), cache: DeviceCache())
        let running = Task { try await lookups.run() }
        running.cancel()
        try await running.value
        let refusal = await #expect(throws: SyncRefusal.self) { try await lookups.device(Self.hash("any"), generation: 0) }
        #expect(refusal?.code == .unavailable)
    }
}
