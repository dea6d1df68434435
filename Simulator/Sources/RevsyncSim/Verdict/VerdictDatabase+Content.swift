import Foundation
import Logging
import PostgresNIO
import RevsyncRules
import RevsyncWire

/// The reads behind "acknowledged content": the log entries at the acknowledged
/// revisions and the devices' temporary-id maps.
extension VerdictDatabase {
    /// Log entries are read this many revisions at a time, so memory holds one batch.
    static let contentBatch = 500

    static func contentAudit(
        of acknowledged: [AcknowledgedChangeSet], horizon: Int64, schema: DatasetSchema, on connection: PostgresConnection, logger: Logger
    ) async throws -> ContentAudit {
        var audit = ContentAudit()
        guard !acknowledged.isEmpty else { return audit }
        let temporaryIds = try await temporaryIds(of: Set(acknowledged.map(\.device)), on: connection, logger: logger)
        let byRevision = Dictionary(grouping: acknowledged, by: \.revision)
        let revisions = byRevision.keys.sorted()
        for start in stride(from: 0, to: revisions.count, by: contentBatch) {
            let batch = Array(revisions[start..<min(start + contentBatch, revisions.count)])
            let (entries, unreadable) = try await logEntries(at: batch, on: connection, logger: logger)
            for revision in batch {
                for ack in byRevision[revision] ?? [] {
                    if let problem = unreadable[revision] {
                        audit.acknowledged += 1
                        audit.mismatches.append(ContentMismatch(device: ack.device, seq: ack.seq, revision: revision, problem: problem))
                        continue
                    }
                    audit.check(ack, entry: entries[revision], horizon: horizon, temporaryIds: temporaryIds[ack.device] ?? [:], schema: schema)
                }
            }
        }
        audit.mismatches.sort { ($0.device, $0.seq, $0.revision) < ($1.device, $1.seq, $1.revision) }
        return audit
    }

    /// The device (public id) that made each of `revisions`, in batches; revisions the log no
    /// longer holds (pruned) are left out.
    static func authors(at revisions: [Int64], on connection: PostgresConnection, logger: Logger) async throws -> [Int64: String] {
        var authors: [Int64: String] = [:]
        let sorted = revisions.sorted()
        for start in stride(from: 0, to: sorted.count, by: contentBatch * 10) {
            let batch = Array(sorted[start..<min(start + contentBatch * 10, sorted.count)])
            let rows = try await connection.query(
                """
                SELECT l.revision, d.public_id::text FROM revsync_log AS l JOIN revsync_devices AS d ON d.id = l.device_id
                WHERE l.revision = ANY(\(batch))
                """, logger: logger)
            for try await (revision, device) in rows.decode((Int64, String).self) { authors[revision] = device.lowercased() }
        }
        return authors
    }

    /// Each device's temporary ids and the permanent ids the server gave them.
    static func temporaryIds(
        of devices: Set<String>, on connection: PostgresConnection, logger: Logger
    ) async throws -> [String: [Int64: Int64]] {
        let rows = try await connection.query(
            """
            SELECT d.public_id::text, t.temp_id, t.id FROM revsync_temp_ids AS t JOIN revsync_devices AS d ON d.id = t.device_id
            WHERE d.public_id = ANY(\(Array(devices))::uuid[])
            """, logger: logger)
        var map: [String: [Int64: Int64]] = [:]
        for try await (device, temporaryId, id) in rows.decode((String, Int64, Int64).self) {
            map[device.lowercased(), default: [:]][temporaryId] = id
        }
        return map
    }

    /// The entries at `revisions`, and the revisions whose author body does not decode (with why).
    static func logEntries(
        at revisions: [Int64], on connection: PostgresConnection, logger: Logger
    ) async throws -> ([Int64: LoggedChangeSet], [Int64: String]) {
        let rows = try await connection.query(
            """
            SELECT l.revision, d.public_id::text, l.seq, l.author_body
            FROM revsync_log AS l JOIN revsync_devices AS d ON d.id = l.device_id
            WHERE l.revision = ANY(\(revisions))
            """, logger: logger)
        var entries: [Int64: LoggedChangeSet] = [:]
        var unreadable: [Int64: String] = [:]
        let decoder = JSONDecoder()
        for try await (revision, device, seq, body) in rows.decode((Int64, String, Int64?, String).self) {
            do {
                let authorBody = try decoder.decode(ChangeSet.self, from: Data(body.utf8))
                entries[revision] = LoggedChangeSet(revision: revision, device: device, seq: seq, authorBody: authorBody)
            } catch {
                unreadable[revision] = "the log entry's author_body does not decode as a change set: \(error)"
            }
        }
        return (entries, unreadable)
    }
}
