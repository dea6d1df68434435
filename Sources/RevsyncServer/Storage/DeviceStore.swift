import Crypto
import Foundation
import Logging
import NIOCore
import PostgresNIO

/// A registered device as the server knows it.
public struct Device: Sendable, Hashable {
    /// Internal key, stored in the log and the temporary-id map.
    public let id: Int64
    /// The id shown to clients (`deviceId`).
    public let publicId: String
    public let name: String
    public let user: String
    public let role: String
}

/// Devices and their bearer tokens. Tokens are stored as SHA-256 hashes only.
public struct DeviceStore: Sendable {
    let database: Database
    let cache: DeviceCache

    public init(database: Database) {
        self.database = database
        self.cache = DeviceCache()
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
        guard let row else { throw SyncError(.internal, "registering the device returned nothing") }
        let (id, publicId) = try row.decode((Int64, String).self)
        return (Device(id: id, publicId: publicId, name: name, user: user, role: role), token)
    }

    /// The device holding `token`, or nil. Found devices are cached: tokens are never revoked
    /// while the server runs, so a catch-up request needs no query to authenticate.
    public func authenticate(token: String) async throws -> Device? {
        let hash = Self.hash(token)
        if let device = await cache.device(for: hash) { return device }
        let logger = database.logger
        let bound = ByteBuffer(bytes: hash)
        let rows = try await database.withConnection { connection in
            try await connection.rows(
                "SELECT id, public_id::text, name, user_name, role FROM revsync_devices WHERE token_hash = \(bound)", logger)
        }
        guard let row = rows.first else { return nil }
        let (id, publicId, name, user, role) = try row.decode((Int64, String, String, String, String).self)
        let device = Device(id: id, publicId: publicId, name: name, user: user, role: role)
        await cache.store(device, for: hash)
        return device
    }

    /// The highest seq the device has had handled.
    func lastSeq(of device: Device) async throws -> Int64 {
        let logger = database.logger
        let rows = try await database.withConnection { connection in
            try await connection.rows("SELECT last_seq FROM revsync_devices WHERE id = \(device.id)", logger)
        }
        guard let row = rows.first else { throw SyncError(.unauthorized, "the device no longer exists") }
        return try row.decode(Int64.self)
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

/// Authenticated devices by token hash, bounded so a flood of devices cannot grow it without limit.
actor DeviceCache {
    private var devices: [[UInt8]: Device] = [:]
    private let capacity = 100_000

    func device(for hash: [UInt8]) -> Device? { devices[hash] }

    func store(_ device: Device, for hash: [UInt8]) {
        if devices.count >= capacity { devices.removeAll(keepingCapacity: true) }
        devices[hash] = device
    }
}
