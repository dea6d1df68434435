import Foundation
import NIOCore
import PostgresNIO
import RevsyncRules
import RevsyncWire

/// Devices in `revsync_devices`.
struct PostgresDeviceDirectory: DeviceDirectory {
    let database: Database

    func insert(name: String, user: String, role: String, tokenHash: [UInt8]) async throws -> Device {
        let hash = ByteBuffer(bytes: tokenHash)
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
        return Device(id: id, publicId: publicId, name: name, user: user, role: role)
    }

    func find(tokenHash: [UInt8]) async throws -> DeviceRow? {
        let logger = database.logger
        let bound = ByteBuffer(bytes: tokenHash)
        let rows = try await database.withConnection { connection in
            try await connection.rows(
                """
                SELECT id, public_id::text, name, user_name, role, revoked_at IS NOT NULL FROM revsync_devices WHERE token_hash = \(bound)
                """, logger)
        }
        guard let row = rows.first else { return nil }
        let (id, publicId, name, user, role, revoked) = try row.decode((Int64, String, String, String, String, Bool).self)
        return DeviceRow(device: Device(id: id, publicId: publicId, name: name, user: user, role: role), revoked: revoked)
    }

    func find(tokenHashes: [[UInt8]]) async throws -> [[UInt8]: DeviceRow] {
        let logger = database.logger
        let bound = tokenHashes.map { ByteBuffer(bytes: $0) }
        let rows = try await database.withConnection { connection in
            try await connection.rows(
                """
                SELECT token_hash, id, public_id::text, name, user_name, role, revoked_at IS NOT NULL
                FROM revsync_devices WHERE token_hash = ANY(\(bound))
                """, logger)
        }
        var found: [[UInt8]: DeviceRow] = [:]
        for row in rows {
            let (hash, id, publicId, name, user, role, revoked) = try row.decode((ByteBuffer, Int64, String, String, String, String, Bool).self)
            found[Array(hash.readableBytesView)] = DeviceRow(device: Device(id: id, publicId: publicId, name: name, user: user, role: role), revoked: revoked)
        }
        return found
    }

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

    func info(_ device: Device) async throws -> DeviceInfo {
        let logger = database.logger
        let rows = try await database.withConnection { connection in
            try await connection.rows("SELECT \(unescaped: Self.infoColumns) FROM revsync_devices d WHERE d.id = \(device.id)", logger)
        }
        guard let row = rows.first else { throw SyncRefusal.deviceGone }
        return try Self.info(row)
    }

    func list() async throws -> [DeviceInfo] {
        let logger = database.logger
        let rows = try await database.withConnection { connection in
            try await connection.rows("SELECT \(unescaped: Self.infoColumns) FROM revsync_devices d ORDER BY d.id", logger)
        }
        return try rows.map(Self.info)
    }

    /// The update waits for any change set of the device in flight, which locks its row.
    func revoke(publicId: String) async throws -> Bool {
        guard let uuid = UUID(uuidString: publicId) else { return false }
        let logger = database.logger
        let rows = try await database.withConnection { connection in
            try await connection.rows(
                """
                WITH u AS (UPDATE revsync_devices SET revoked_at = COALESCE(revoked_at, now()) WHERE public_id = \(uuid) RETURNING id),
                \(unescaped: Self.countChange) SELECT id FROM u
                """, logger)
        }
        return !rows.isEmpty
    }

    func replaceToken(publicId: String, tokenHash: [UInt8]) async throws -> Bool {
        guard let uuid = UUID(uuidString: publicId) else { return false }
        let hash = ByteBuffer(bytes: tokenHash)
        let logger = database.logger
        let rows = try await database.withConnection { connection in
            try await connection.rows(
                """
                WITH u AS (UPDATE revsync_devices SET token_hash = \(hash) WHERE public_id = \(uuid) AND revoked_at IS NULL RETURNING id),
                \(unescaped: Self.countChange) SELECT id FROM u
                """, logger)
        }
        return !rows.isEmpty
    }

    func setRole(publicId: String, role: String) async throws -> DeviceInfo? {
        guard let uuid = UUID(uuidString: publicId) else { return nil }
        let logger = database.logger
        let rows = try await database.withConnection { connection in
            try await connection.rows(
                """
                WITH u AS (UPDATE revsync_devices SET role = \(role) WHERE public_id = \(uuid) AND revoked_at IS NULL RETURNING *),
                \(unescaped: Self.countChange) SELECT \(unescaped: Self.infoColumns) FROM u d
                """, logger)
        }
        return try rows.first.map(Self.info)
    }

    /// The part of a device change's statement that raises `revsync_device_changes` when the
    /// change found its device (`u`, the update before it): other instances read the counter
    /// with the head, whatever became of the change's announcement on Redis.
    static let countChange = "c AS (UPDATE revsync_device_changes SET version = version + 1 WHERE EXISTS (SELECT 1 FROM u))"

    func markSeen(_ ids: [Int64]) async throws {
        guard !ids.isEmpty else { return }
        let logger = database.logger
        try await database.withConnection { connection in
            try await connection.run("UPDATE revsync_devices SET last_seen_at = now() WHERE id = ANY(\(ids))", logger)
        }
    }
}
