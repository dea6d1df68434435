import Logging
import NIOCore
import PostgresNIO
import RevsyncRules
import RevsyncWire

/// Streams the whole dataset as one change set of creates at one revision.
///
/// Reads run in a REPEATABLE READ transaction, so every table is seen at the
/// same instant and the head read first is exactly the revision of that state.
struct SnapshotStreamer: Sendable {
    let database: Database
    let schema: DatasetSchema
    /// Bytes gathered before handing a chunk to the response.
    let chunkSize = 64 * 1024
    /// Rows read from PostgreSQL at once (`forEachPage`): none waits in a stream while a chunk
    /// is written.
    var pageSize = 2_000

    /// - Parameter device: the requesting device's id: the snapshot says which of its change
    ///   sets its records hold (`"lastSeq"`), read in the same transaction.
    func stream(for device: Int64? = nil, _ emit: (ByteBuffer) async throws -> Void) async throws {
        let logger = database.logger
        let schema = self.schema, chunkSize = self.chunkSize, pageSize = self.pageSize
        try await database.streamingTransaction("REPEATABLE READ READ ONLY") { connection in
            let headRows = try await connection.rows("SELECT head, history::text FROM revsync_head", logger)
            guard let (head, history) = try headRows.first?.decode((Int64, String).self) else {
                throw StoreError.inconsistent("revsync_head has no row: the database is not migrated")
            }
            var lastSeq: Int64?
            if let device {
                let rows = try await connection.rows("SELECT last_seq FROM revsync_devices WHERE id = \(device)", logger)
                lastSeq = try rows.first?.decode(Int64.self)
            }
            var out = JSONWriter(capacity: chunkSize + 4096)
            func flush(force: Bool) async throws {
                guard force || out.bytes.count >= chunkSize else { return }
                try await emit(ByteBuffer(bytes: out.bytes))
                out = JSONWriter(capacity: chunkSize + 4096)
            }
            out.raw("{\"maxRevision\":")
            out.integer(head)
            // The history id the records are of, read in the same transaction (`HistoryRules`).
            out.raw(",\"history\":")
            out.string(history)
            // The device's change sets through this seq are in these records: pending ones among
            // them are not replayed over them (`SnapshotLoader`).
            if let lastSeq {
                out.raw(",\"lastSeq\":")
                out.integer(lastSeq)
            }
            out.raw(",\"changeSets\":[{\"conflict\":false,\"revision\":")
            out.integer(head)
            out.raw(",\"types\":")
            out.stringArray(schema.entities.map(\.name))
            for entity in schema.entities {
                let columns = RecordColumns(entity)
                let order = entity.attributes.map(\.name)
                out.byte(UInt8(ascii: ","))
                out.key(entity.name)
                // Attributes stream first; the id list (small) follows once all rows are seen.
                out.raw("{\"update\":[],\"delete\":[],\"attributes\":{")
                var ids: [Int64] = []
                try await connection.forEachPage(of: columns, size: pageSize, logger) { page in
                    for record in page {
                        if !ids.isEmpty { out.byte(UInt8(ascii: ",")) }
                        ids.append(record.id)
                        out.storedRecord(record, order: order)
                        try await flush(force: false)
                    }
                }
                out.raw("},\"create\":")
                out.integerArray(ids)
                out.byte(UInt8(ascii: "}"))
            }
            out.raw("}]}")
            try await flush(force: true)
        }
    }
}
