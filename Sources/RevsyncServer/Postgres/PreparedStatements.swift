import Logging
import PostgresNIO
import Synchronization

/// The write path's statements, kept prepared on each connection.
///
/// PostgresNIO sends a query as an unnamed statement, which PostgreSQL parses and plans on
/// every run: for a lone writer that was 1.2 ms of the 2.0 ms each transaction spent in
/// PostgreSQL (docs/performance.md, "Where a lone writer's 4 ms go"). A named statement is
/// parsed once per connection, and PostgreSQL may keep its plan. PostgresNIO names prepared
/// statements by type (`PostgresPreparedStatement`'s static `name` and `sql`), while the
/// write path's SQL depends on the batch's shape (which entities, which kinds of change);
/// so each new SQL text takes a *slot* for the life of the process, a type of its own made
/// of two hex digits. 256 slots; texts beyond them run unnamed, as before.
///
/// A statement whose preparation fails stays failed on its connection (PostgresNIO keeps the
/// error), so after any error from a slot that connection runs the slot's text unnamed.
enum PreparedStatements {
    static let slotCount = 256

    private struct Registry {
        var slots: [String: Int] = [:]
        var texts: [String] = []
        /// Connection and slot pairs that saw an error: unnamed from then on.
        var avoided: Set<[Int]> = []
    }

    private static let registry = Mutex(Registry())

    /// The slot of `sql`, taking a free one for a new text; nil when all are taken.
    static func slot(for sql: String, connection: PostgresConnection.ID) -> Int? {
        registry.withLock { registry in
            let slot: Int
            if let known = registry.slots[sql] {
                slot = known
            } else {
                guard registry.texts.count < slotCount else { return nil }
                slot = registry.texts.count
                registry.texts.append(sql)
                registry.slots[sql] = slot
            }
            return registry.avoided.contains([connection, slot]) ? nil : slot
        }
    }

    static func sql(_ slot: Int) -> String { registry.withLock { $0.texts[slot] } }

    static func avoid(_ slot: Int, on connection: PostgresConnection.ID) {
        _ = registry.withLock { $0.avoided.insert([connection, slot]) }
    }
}

/// One hex digit of a slot's number, as a type (its values stand for it where a type is picked at run time).
protocol SlotDigit: Sendable { static var value: Int { get } }
struct SlotDigit0: SlotDigit { static let value = 0 }
struct SlotDigit1: SlotDigit { static let value = 1 }
struct SlotDigit2: SlotDigit { static let value = 2 }
struct SlotDigit3: SlotDigit { static let value = 3 }
struct SlotDigit4: SlotDigit { static let value = 4 }
struct SlotDigit5: SlotDigit { static let value = 5 }
struct SlotDigit6: SlotDigit { static let value = 6 }
struct SlotDigit7: SlotDigit { static let value = 7 }
struct SlotDigit8: SlotDigit { static let value = 8 }
struct SlotDigit9: SlotDigit { static let value = 9 }
struct SlotDigit10: SlotDigit { static let value = 10 }
struct SlotDigit11: SlotDigit { static let value = 11 }
struct SlotDigit12: SlotDigit { static let value = 12 }
struct SlotDigit13: SlotDigit { static let value = 13 }
struct SlotDigit14: SlotDigit { static let value = 14 }
struct SlotDigit15: SlotDigit { static let value = 15 }

private let slotDigits: [any SlotDigit] = [
    SlotDigit0(), SlotDigit1(), SlotDigit2(), SlotDigit3(), SlotDigit4(), SlotDigit5(), SlotDigit6(), SlotDigit7(),
    SlotDigit8(), SlotDigit9(), SlotDigit10(), SlotDigit11(), SlotDigit12(), SlotDigit13(), SlotDigit14(), SlotDigit15(),
]

/// The statement in slot `High · 16 + Low`.
struct SlotStatement<High: SlotDigit, Low: SlotDigit>: PostgresPreparedStatement {
    typealias Row = PostgresRow
    static var slot: Int { High.value * 16 + Low.value }
    static var name: String { "revsync_slot_\(slot)" }
    static var sql: String { PreparedStatements.sql(slot) }

    let bindings: PostgresBindings

    func makeBindings() throws -> PostgresBindings { bindings }
    func decodeRow(_ row: PostgresRow) throws -> PostgresRow { row }
}

extension PostgresConnection {
    /// `rows(_:_:)` through a prepared statement where a slot is free.
    func preparedRows(_ query: PostgresQuery, _ logger: Logger) async throws -> [PostgresRow] {
        guard query.binds.count > 0, let slot = PreparedStatements.slot(for: query.sql, connection: id) else {
            return try await rows(query, logger)
        }
        // As `openQuery` does: a statement written to a closed connection is never answered.
        try ensureOpen()
        do {
            return try await slotDigits[slot / 16].rows(low: slotDigits[slot % 16], on: self, query.binds, logger)
        } catch {
            PreparedStatements.avoid(slot, on: id)
            throw error
        }
    }

    /// `run(_:_:)` through a prepared statement where a slot is free.
    func preparedRun(_ query: PostgresQuery, _ logger: Logger) async throws {
        _ = try await preparedRows(query, logger)
    }
}

extension SlotDigit {
    /// Runs slot `Self · 16 + low`: a method on an existential opens it, so each digit picks its type.
    fileprivate func rows(low: any SlotDigit, on connection: PostgresConnection, _ bindings: PostgresBindings, _ logger: Logger)
        async throws -> [PostgresRow]
    {
        try await low.rows(high: Self.self, on: connection, bindings, logger)
    }

    fileprivate func rows<High: SlotDigit>(high: High.Type, on connection: PostgresConnection, _ bindings: PostgresBindings, _ logger: Logger)
        async throws -> [PostgresRow]
    {
        var rows: [PostgresRow] = []
        for try await row in try await connection.execute(SlotStatement<High, Self>(bindings: bindings), logger: logger) { rows.append(row) }
        return rows
    }
}
