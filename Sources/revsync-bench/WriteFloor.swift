import Foundation
import Logging
import PostgresNIO
import RevsyncRules
import RevsyncWire

/// The floor under the write path: the cheapest SQL that does the durable work of the
/// bench's change set (take the next revision, insert the note, insert its log entry),
/// sent by the bench itself over one connection in a tight loop, with no server.
///
/// Each commit is one autocommit statement: one round trip, and with `synchronous_commit`
/// on, one WAL flush that the statement waits for, as the server's COMMIT does. Batching
/// k change sets per commit shares that flush, which is what bounds any server that
/// commits one change set at a time.
struct WriteFloor {
    let url: String
    let logger: Logger
    /// The log entry of one created note, as the server writes it: the revision is
    /// `JSONWriter.placeholder`, substituted in the statement as the server's stamp does.
    let body: String
    let authorBody: String

    init(url: String, schema: DatasetSchema, logger: Logger) {
        self.url = url
        self.logger = logger
        var applied = AppliedChangeSet(seq: 1, types: ["notes"])
        // The floor never learns the ids its notes get; a six-digit id gives the entry the server's size.
        let values: Attributes = ["author_id": .null, "player_id": .null, "body": .string("bench note 1"), "pinned": false]
        applied.create("notes", CreatedRecord(id: 100_000, temporaryId: -1, values: values))
        body = String(decoding: LogEntryEncoder.encode(applied, schema: schema, author: false), as: UTF8.self)
        authorBody = String(decoding: LogEntryEncoder.encode(applied, schema: schema, author: true), as: UTF8.self)
    }

    /// One row per batch size (1 is one commit per change set), each measured for `seconds`, on one connection.
    func measure(perCommit sizes: [Int], seconds: Int) async throws -> [FloorRow] {
        try await SQL.withConnection(url, logger: logger) { connection in
            // Any registered device: the log's foreign key wants one, and nothing reads it back.
            let rows = try await connection.rows("SELECT min(id) FROM revsync_devices", logger)
            guard let device = try rows.first?.decode(Int64?.self) else { throw BenchError("the floor needs a registered device") }
            var floor: [FloorRow] = []
            for size in sizes {
                print("floor: \(FloorRow.label(perCommit: size)) for \(seconds) s …")
                floor.append(try await measure(perCommit: size, seconds: seconds, device: device, on: connection))
            }
            return floor
        }
    }

    private func measure(perCommit size: Int, seconds: Int, device: Int64, on connection: PostgresConnection) async throws -> FloorRow {
        let statement = commit(perCommit: size, device: device)
        let clock = ContinuousClock()
        let start = clock.now, deadline = start + .seconds(seconds)
        var samples: [Duration] = []
        while clock.now < deadline {
            samples.append(try await clock.measure { try await connection.run(statement, logger) })
        }
        // The time the commits took, the last one included, so the rate is not flattered.
        let elapsed = clock.now - start
        return FloorRow(perCommit: size, commits: samples.count, seconds: elapsed.inSeconds, latency: Latencies(samples))
    }

    /// `size` change sets in one statement: the head moves by `size` under its row lock, and
    /// each new revision gets its note and its log entry. Only `head` and `singleton` of
    /// `revsync_head` are touched, so its other columns may move elsewhere.
    private func commit(perCommit size: Int, device: Int64) -> PostgresQuery {
        var binds = PostgresBindings()
        binds.append(device)
        binds.append(Int64(size))
        binds.append(body)
        binds.append(authorBody)
        return PostgresQuery(
            unsafeSQL: """
                WITH h AS (UPDATE revsync_head SET head = head + $2 WHERE singleton RETURNING head),
                r AS (SELECT h.head - $2 + g AS revision FROM h, generate_series(1, $2) AS g),
                n AS (INSERT INTO notes (revision, rs_writer, rs_other_revision, author_id, player_id, body, pinned)
                      SELECT revision, $1, 0, NULL, NULL, 'bench note', false FROM r)
                INSERT INTO revsync_log (revision, device_id, seq, body, author_body)
                SELECT revision, $1, NULL, replace($3, chr(1), revision::text), replace($4, chr(1), revision::text) FROM r
                """, binds: binds)
    }
}
