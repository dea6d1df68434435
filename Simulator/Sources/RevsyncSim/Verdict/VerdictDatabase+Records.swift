import Logging
import PostgresNIO
import RevsyncDevice
import RevsyncRules
import RevsyncServer
import RevsyncWire

/// PostgreSQL's state in the devices' record form, read with the server's own
/// row decoding (the one `/snapshot` uses), so digests compare directly.
extension VerdictDatabase {
    /// The digest of every entity of `schema`, in schema order, each table streamed in id order.
    static func digests(of schema: DatasetSchema, on connection: PostgresConnection, logger: Logger) async throws -> [EntityDigest] {
        var digests: [EntityDigest] = []
        for entity in schema.entities {
            var digester = EntityDigester(entity: entity.name, attributes: entity.attributes)
            try await forEachRecord(of: entity, on: connection, logger: logger) { digester.add($0) }
            digests.append(digester.finish())
        }
        return digests
    }

    /// Every record of `entity`, in id order.
    public func records(of entity: Entity) async throws -> [DeviceRecord] {
        let logger = self.logger
        return try await client.withConnection { connection in
            var records: [DeviceRecord] = []
            try await Self.forEachRecord(of: entity, on: connection, logger: logger) { records.append($0) }
            return records
        }
    }

    static func forEachRecord(
        of entity: Entity, on connection: PostgresConnection, logger: Logger, _ body: (DeviceRecord) throws -> Void
    ) async throws {
        let columns = RecordColumns(entity)
        let rows = try await connection.query(
            "SELECT \(unescaped: columns.selectList) FROM \(unescaped: columns.table) AS t ORDER BY t.id", logger: logger)
        for try await row in rows {
            let stored = try columns.decode(row)
            try body(DeviceRecord(id: stored.id, revision: stored.revision, attributes: stored.values))
        }
    }
}
