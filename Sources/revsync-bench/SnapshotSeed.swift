import Foundation
import Logging
import PostgresNIO
import RevsyncRules
import RevsyncServer
import RevsyncWire

/// A dataset of a given number of records across every entity of the schema, written straight
/// into a migrated database with `INSERT … SELECT … FROM generate_series`: a million records
/// through `/sync` would take longer than everything the snapshot bench measures.
///
/// The data is what the server could have written: every NOT NULL column filled, every
/// reference pointing at an existing id (the deferred foreign keys check it at the commit), ids
/// from 1 with each table's identity moved past them, and each record its own revision, as if
/// every record had been created by a change set of its own and the log then pruned: the head
/// and the horizon are the number of records.
struct SnapshotSeed {
    /// The mix of `Tests/RevsyncDeviceTests/BootstrapBenchmark.swift` (100,000 records in all),
    /// which the seed scales to its size, so that the figures compare with that test's.
    static let mix: [String: Int] = [
        "leagues": 10, "seasons": 50, "teams": 200, "users": 10_000, "players": 10_000, "screens": 1_000,
        "screen_items": 10_000, "screen_instances": 20_000, "screen_instance_items": 38_740, "matches": 2_000,
        "trainings": 2_000, "attendances": 5_000, "notes": 1_000,
    ]
    /// The share of an entity the mix does not name, as that test gives it.
    static let otherWeight = 100

    let schema: DatasetSchema
    let records: Int
    /// Records of each entity, in schema order; they sum to `records`.
    let counts: [(entity: String, count: Int)]

    init(schema: DatasetSchema, records: Int) throws {
        guard records >= schema.entities.count else {
            throw BenchError("\(records) records cannot give each of the schema's \(schema.entities.count) entities one")
        }
        self.schema = schema
        self.records = records
        let weights = schema.entities.map { Self.mix[$0.name] ?? Self.otherWeight }
        let total = weights.reduce(0, +)
        // Largest remainder, so that the counts add up to exactly `records`; at least one record
        // each, so that every reference has something to point at.
        let exact = weights.map { Double(records) * Double($0) / Double(total) }
        var counts = exact.map { max(1, Int($0)) }
        var missing = records - counts.reduce(0, +)
        let byRemainder = exact.indices.sorted { exact[$0] - exact[$0].rounded(.down) > exact[$1] - exact[$1].rounded(.down) }
        var next = 0
        while missing > 0 {
            counts[byRemainder[next % byRemainder.count]] += 1
            missing -= 1
            next += 1
        }
        while missing < 0, let largest = counts.indices.max(by: { counts[$0] < counts[$1] }), counts[largest] > 1 {
            counts[largest] -= 1
            missing += 1
        }
        self.counts = zip(schema.entities, counts).map { ($0.name, $1) }
    }

    func count(of entity: String) -> Int { counts.first { $0.entity == entity }?.count ?? 0 }

    /// Writes the records into the migrated, empty database at `url` in one transaction, then
    /// vacuums it: rows read for the first time would otherwise have their hint bits written
    /// by the first snapshot's read, which data that has been there a while does not pay.
    func write(to url: String, logger: Logger) async throws {
        try await SQL.withConnection(url, logger: logger) { connection in
            try await connection.run("BEGIN", logger)
            do {
                for statement in statements() { try await connection.run(PostgresQuery(unsafeSQL: statement), logger) }
                try await connection.run("COMMIT", logger)
            } catch {
                try? await connection.run("ROLLBACK", logger)
                throw error
            }
            try await connection.run("VACUUM (ANALYZE)", logger)
        }
    }

    /// The statements of the seed; schema names are checked identifiers, so they are quoted, not bound.
    func statements() -> [String] {
        var statements: [String] = []
        var revisions = 0
        for entity in schema.entities {
            let table = SQLIdentifier.quoted(entity.name)
            let count = count(of: entity.name)
            // rs_writer 0: no device wrote it (device ids start at 1), so no device's later write
            // counts as its own.
            let columns = ["id", "revision", "rs_writer", "rs_other_revision"] + entity.attributes.map { SQLIdentifier.quoted($0.name) }
            let values = ["g", "\(revisions) + g", "0", "0"] + entity.attributes.map { value(of: $0) }
            statements.append(
                "INSERT INTO \(table) (\(columns.joined(separator: ", "))) SELECT \(values.joined(separator: ", ")) FROM generate_series(1, \(count)) AS g")
            // Records the server creates later must not take a seeded id.
            statements.append("SELECT setval(pg_get_serial_sequence('\(table)', 'id'), \(count))")
            revisions += count
        }
        statements.append("UPDATE revsync_head SET head = \(revisions)")
        statements.append("UPDATE revsync_horizon SET horizon = \(revisions)")
        return statements
    }

    /// The SQL of one attribute's value for row `g` (from 1): the values
    /// `BootstrapBenchmark.value(for:index:)` gives record `g - 1`.
    private func value(of attribute: AttributeDescription) -> String {
        if let target = attribute.references {
            return "1 + (g - 1) % \(max(1, count(of: target)))"
        }
        switch attribute.type {
        case .string: return "'\(attribute.name) value ' || (g - 1)"
        case .integer: return "(g - 1) % 97"
        case .double: return "(g - 1)::double precision / 7"
        case .boolean: return "(g - 1) % 2 = 0"
        case .timestamp: return "to_timestamp(1400000000 + (g - 1)::double precision * 60)"
        }
    }
}
