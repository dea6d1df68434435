import Logging
import PostgresNIO
import RevsyncRules

/// Stored records read from PostgreSQL, each snapshot one `REPEATABLE READ READ ONLY` transaction.
struct PostgresRecordStore: RecordStore {
    let database: Database
    let schema: DatasetSchema

    func snapshot<T: Sendable>(_ body: @escaping @Sendable (any RecordReading) async throws -> T) async throws -> T {
        let schema = self.schema, logger = database.logger
        return try await database.transaction("REPEATABLE READ READ ONLY") { connection in
            try await body(PostgresRecordReading(connection: connection, schema: schema, logger: logger))
        }
    }
}

struct PostgresRecordReading: RecordReading {
    let connection: PostgresConnection
    let schema: DatasetSchema
    let logger: Logger

    func mappings(_ ids: Set<Int64>, device: Device) async throws -> [Int64: TemporaryIdMapping] {
        guard let query = PostgresApplyTransaction.mappingsQuery([device.id: ids], allocating: [:]) else { return [:] }
        return try PostgresApplyTransaction.mappings(from: try await connection.preparedRows(query, logger)).known[device.id] ?? [:]
    }

    func records(_ entity: String, ids: [Int64]) async throws -> [StoredRecord] {
        guard let definition = schema.entity(named: entity), !ids.isEmpty else { return [] }
        let columns = RecordColumns(definition)
        let rows = try await connection.rows(
            "SELECT \(unescaped: columns.selectList) FROM \(unescaped: columns.table) AS t WHERE t.id = ANY(\(ids)) ORDER BY t.id", logger)
        return try rows.map(columns.decode)
    }

    func records(_ entity: String, where attribute: String, in parents: [Int64], limit: Int) async throws -> [StoredRecord] {
        guard let definition = schema.entity(named: entity), !parents.isEmpty, limit > 0 else { return [] }
        let columns = RecordColumns(definition)
        let count = Int64(min(limit, Int(Int32.max)))
        let rows = try await connection.rows(
            """
            SELECT \(unescaped: columns.selectList) FROM \(unescaped: columns.table) AS t
            WHERE t.\(unescaped: SQLIdentifier.quoted(attribute)) = ANY(\(parents)) ORDER BY t.id LIMIT \(count)
            """, logger)
        return try rows.map(columns.decode)
    }

    func createdIds(device: Device, seq: Int64) async throws -> [CreatedId] {
        let rows = try await connection.rows(
            "SELECT entity, temp_id, id FROM revsync_temp_ids WHERE device_id = \(device.id) AND seq = \(seq) ORDER BY temp_id DESC", logger)
        return try rows.map { row in
            let (entity, temporary, id) = try row.decode((String, Int64, Int64).self)
            return CreatedId(temporaryId: temporary, entity: entity, id: id)
        }
    }
}
