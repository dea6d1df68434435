import Crypto
import Foundation
import Logging
import NIOCore
import PostgresNIO
import RevsyncRules
import RevsyncWire

/// Devices and their bearer tokens. Tokens are stored as SHA-256 hashes only.
public struct DeviceStore: Sendable {
    let database: Database
    let cache: DeviceCache

    public init(database: Database, lookupsPerSecond: Int = 2000) {
        self.database = database
        self.cache = DeviceCache(lookupsPerSecond: lookupsPerSecond)
    }

    /// Registers a device and returns it with its token (shown once, never stored).
    public func register(name: String, user: String, role: String) async throws -> (Device, token: String) {
        let token = Self.newToken()
        let hash = ByteBuffer(bytes: Self.hash(token))
        let logger = database.logger
        let row = try await database.withConnection { connection in
            try await connection.rows(
                """
                INSERT INTO revsync_devices (name, user_name, role, token_hash) VALUES (\(name), \(user), \(role), \(hash))
                RETURNING id, public_id::text
                """, logger
            ).first
        }
        guard let row else { throw StoreError.inconsistent("registering the device returned nothing") }
        let (id, publicId) = try row.decode((Int64, String).self)
        return (Device(id: id, publicId: publicId, name: name, user: user, role: role), token)
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
        let logger = database.logger
        let bound = ByteBuffer(bytes: hash)
        let rows = try await database.withConnection { connection in
            try await connection.rows(
                """
                SELECT id, public_id::text, name, user_name, role, revoked_at IS NOT NULL FROM revsync_devices WHERE token_hash = \(bound)
                """, logger)
        }
        guard let row = rows.first else {
            await cache.storeUnknown(hash)
            return nil
        }
        let (id, publicId, name, user, role, revoked) = try row.decode((Int64, String, String, String, String, Bool).self)
        if revoked { throw SyncRefusal.deviceRevoked }
        let device = Device(id: id, publicId: publicId, name: name, user: user, role: role)
        await cache.store(device, for: hash, generation: generation)
        return device
    }

    // MARK: The lifecycle (admin)

    private static let infoColumns = """
        d.public_id::text, d.name, d.user_name, d.role,
        to_char(d.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'),
        to_char(d.last_seen_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'),
        d.last_seq,
        COALESCE((SELECT min(t.temp_id) FROM revsync_temp_ids t WHERE t.device_id = d.id), 0),
        to_char(d.revoked_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"')
        """

    private static func info(_ row: PostgresRow) throws -> DeviceInfo {
        let (publicId, name, user, role, created, lastSeen, lastSeq, lowest, revoked) =
            try row.decode((String, String, String, String, String, String?, Int64, Int64, String?).self)
        return DeviceInfo(
            deviceId: publicId, name: name, user: user, role: role, created: created, lastSeen: lastSeen,
            lastSeq: lastSeq, lowestTemporaryId: lowest, revoked: revoked)
    }

    /// What the server knows of one device (`GET /devices/me`).
    public func info(_ device: Device) async throws -> DeviceInfo {
        let logger = database.logger
        let rows = try await database.withConnection { connection in
            try await connection.rows("SELECT \(unescaped: Self.infoColumns) FROM revsync_devices d WHERE d.id = \(device.id)", logger)
        }
        guard let row = rows.first else { throw SyncRefusal.deviceGone }
        return try Self.info(row)
    }

    /// Every device, revoked ones included, oldest first.
    public func list() async throws -> [DeviceInfo] {
        let logger = database.logger
        let rows = try await database.withConnection { connection in
            try await connection.rows("SELECT \(unescaped: Self.infoColumns) FROM revsync_devices d ORDER BY d.id", logger)
        }
        return try rows.map(Self.info)
    }

    /// Revokes a device: its token stops working, and no change set of it commits after this
    /// returns (the update waits for any of its change sets in flight, which lock its row).
    /// - Returns: false when there is no such device.
    public func revoke(publicId: String) async throws -> Bool {
        guard let uuid = UUID(uuidString: publicId) else { return false }
        let logger = database.logger
        let rows = try await database.withConnection { connection in
            try await connection.rows(
                """
                UPDATE revsync_devices SET revoked_at = COALESCE(revoked_at, now()) WHERE public_id = \(uuid) RETURNING id
                """, logger)
        }
        await cache.invalidateAll()
        return !rows.isEmpty
    }

    /// Gives an active device a new token; the old one stops working. Nil when there is no such active device.
    public func rotate(publicId: String) async throws -> String? {
        guard let uuid = UUID(uuidString: publicId) else { return nil }
        let token = Self.newToken()
        let hash = ByteBuffer(bytes: Self.hash(token))
        let logger = database.logger
        let rows = try await database.withConnection { connection in
            try await connection.rows(
                "UPDATE revsync_devices SET token_hash = \(hash) WHERE public_id = \(uuid) AND revoked_at IS NULL RETURNING id", logger)
        }
        await cache.invalidateAll()
        return rows.isEmpty ? nil : token
    }

    /// Changes an active device's role. Nil when there is no such active device.
    public func setRole(publicId: String, role: String) async throws -> DeviceInfo? {
        guard let uuid = UUID(uuidString: publicId) else { return nil }
        let logger = database.logger
        let rows = try await database.withConnection { connection in
            try await connection.rows(
                """
                WITH u AS (UPDATE revsync_devices SET role = \(role) WHERE public_id = \(uuid) AND revoked_at IS NULL RETURNING *)
                SELECT \(unescaped: Self.infoColumns) FROM u d
                """, logger)
        }
        await cache.invalidateAll()
        return try rows.first.map(Self.info)
    }

    /// Writes `last_seen_at` for the devices seen since the last call: one statement, however many.
    func flushSeen() async throws {
        let seen = Array(await cache.takeSeen())
        guard !seen.isEmpty else { return }
        let logger = database.logger
        try await database.withConnection { connection in
            try await connection.run("UPDATE revsync_devices SET last_seen_at = now() WHERE id = ANY(\(seen))", logger)
        }
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
