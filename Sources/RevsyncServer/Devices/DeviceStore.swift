import Crypto
import Foundation
import RevsyncRules
import RevsyncWire

/// Devices and their bearer tokens: new tokens, authentication through a cache, and the
/// lifecycle an administrator drives. Tokens are kept (in the `DeviceDirectory`) as SHA-256 hashes only.
public struct DeviceStore: Sendable {
    let directory: any DeviceDirectory
    let cache: DeviceCache
    /// Where a token the cache does not hold is looked up, in batches, when its service runs;
    /// nil: each request looks its token up itself.
    let lookups: DeviceLookups?

    /// - Parameter batchedLookups: look tokens the cache does not hold up through a `DeviceLookups`
    ///   service, which whoever runs this store must run (the server does, with its other services).
    package init(directory: any DeviceDirectory, lookupsPerSecond: Int = 2000, batchedLookups: Bool = false) {
        self.directory = directory
        let cache = DeviceCache(lookupsPerSecond: lookupsPerSecond)
        self.cache = cache
        self.lookups = batchedLookups ? DeviceLookups(directory: directory, cache: cache) : nil
    }

    public init(database: Database, lookupsPerSecond: Int = 2000, batchedLookups: Bool = false) {
        self.init(directory: PostgresDeviceDirectory(database: database), lookupsPerSecond: lookupsPerSecond, batchedLookups: batchedLookups)
    }

    /// Registers a device and returns it with its token (shown once, never stored).
    public func register(name: String, user: String, role: String) async throws -> (Device, token: String) {
        let token = Self.newToken()
        return (try await directory.insert(name: name, user: user, role: role, tokenHash: Self.hash(token)), token)
    }

    /// The device holding `token`, or nil; a revoked device's token throws `unauthorized`.
    public func authenticate(token: String) async throws -> Device? {
        let hash = Self.hash(token)
        let generation: Int
        switch await cache.lookup(hash) {
        case .hit(let device): return device
        case .unknown: return nil
        case .throttled:
            throw SyncRefusal(.unavailable, "too many requests with tokens this server has not seen recently: retry shortly", retryAfterSeconds: 2)
        case .miss(let current): generation = current
        }
        return try await authenticateFromDirectory(hash, generation: generation)
    }

    /// A token the cache does not hold: PostgreSQL's answer, which the cache learns. Apart
    /// from `authenticate` so that the usual request (a cache hit) does not take this path's
    /// frame on its task, which keeps its high-water mark for as long as its connection lives;
    /// and through `DeviceLookups` where it runs, so that the look-up's calls are not on the task either.
    @inline(never)
    private func authenticateFromDirectory(_ hash: [UInt8], generation: Int) async throws -> Device? {
        if let lookups { return try await lookups.device(hash, generation: generation) }
        return try await authenticateInDirectory(hash, generation: generation)
    }

    @inline(never)
    private func authenticateInDirectory(_ hash: [UInt8], generation: Int) async throws -> Device? {
        let asked = ContinuousClock.now
        guard let row = try await directory.find(tokenHash: hash) else {
            await cache.storeUnknown(hash)
            return nil
        }
        if row.revoked { throw SyncRefusal.deviceRevoked }
        await cache.store(row.device, for: hash, generation: generation, readAt: asked)
        return row.device
    }

    // MARK: The lifecycle (admin)

    /// What the server knows of one device (`GET /devices/me`).
    public func info(_ device: Device) async throws -> DeviceInfo { try await directory.info(device) }

    /// Every device, revoked ones included, oldest first.
    public func list() async throws -> [DeviceInfo] { try await directory.list() }

    /// Revokes a device: its token stops working, and no change set of it commits after this
    /// returns (the directory's update waits for any of its change sets in flight).
    /// - Returns: false when there is no such device.
    public func revoke(publicId: String) async throws -> Bool {
        let found = try await directory.revoke(publicId: publicId)
        await cache.invalidateAll()
        return found
    }

    /// Gives an active device a new token; the old one stops working. Nil when there is no such active device.
    public func rotate(publicId: String) async throws -> String? {
        let token = Self.newToken()
        let found = try await directory.replaceToken(publicId: publicId, tokenHash: Self.hash(token))
        await cache.invalidateAll()
        return found ? token : nil
    }

    /// Changes an active device's role. Nil when there is no such active device.
    public func setRole(publicId: String, role: String) async throws -> DeviceInfo? {
        let info = try await directory.setRole(publicId: publicId, role: role)
        await cache.invalidateAll()
        return info
    }

    /// Records when the devices seen since the last call were seen: one write, however many.
    func flushSeen() async throws {
        try await directory.markSeen(Array(await cache.takeSeen()))
    }

    static func newToken() -> String {
        var generator = SystemRandomNumberGenerator()
        let bytes = (0..<32).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
        return "rsd_" + bytes.map { String(format: "%02x", $0) }.joined()
    }

    static func hash(_ token: String) -> [UInt8] {
        Array(SHA256.hash(data: Data(token.utf8)))
    }

    /// Compares two secrets in time independent of where they differ.
    static func constantTimeEqual(_ a: String, _ b: String) -> Bool {
        let left = hash(a), right = hash(b)
        return zip(left, right).reduce(UInt8(0)) { $0 | ($1.0 ^ $1.1) } == 0
    }
}
