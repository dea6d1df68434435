import Foundation
import GRDB
import RevsyncSnapshotFile
import RevsyncRules
import RevsyncWire

/// The `RecordStore` over the device's SQLite file, for the span of one GRDB
/// read or write closure (it holds that closure's `Database`).
final class SQLiteRecordStore: RecordStore {
    private let db: Database
    private let layout: SQLiteLayout
    private let encoder = JSONEncoder()
    private let decoder = JSONDecoder()

    init(_ db: Database, layout: SQLiteLayout) {
        self.db = db
        self.layout = layout
    }

    // MARK: Records

    func record(_ entity: String, id: Int64) throws -> DeviceRecord? {
        let table = try layout.table(entity)
        let statement = try db.cachedStatement(sql: table.selectById)
        return try Row.fetchOne(statement, arguments: [id]).map { decode($0, table) }
    }

    func put(_ entity: String, _ record: DeviceRecord) throws {
        let table = try layout.table(entity)
        var values: [JSONValue] = []
        values.reserveCapacity(table.attributes.count)
        for attribute in table.attributes {
            values.append(record.attributes[attribute.name] ?? .null)
        }
        // Bound by SQLite's own calls: GRDB's StatementArguments took more than the upsert itself.
        try SnapshotRowInsert(db.cachedStatement(sql: table.upsert))
            .run(SnapshotRow(id: record.id, revision: record.revision, values: values))
    }

    @discardableResult
    func remove(_ entity: String, id: Int64) throws -> Bool {
        let table = try layout.table(entity)
        try db.cachedStatement(sql: table.deleteById).execute(arguments: [id])
        return db.changesCount > 0
    }

    func ids(_ entity: String, where attribute: String, equals value: Int64) throws -> [Int64] {
        let table = try layout.table(entity)
        guard table.attributes.contains(where: { $0.name == attribute }) else {
            throw DeviceError.unknownAttribute(entity: entity, attribute: attribute)
        }
        let sql = "SELECT \"id\" FROM \(SQLiteLayout.quote(entity)) WHERE \(SQLiteLayout.quote(attribute)) = ? ORDER BY \"id\""
        return try Int64.fetchAll(db.cachedStatement(sql: sql), arguments: [value])
    }

    func records(_ entity: String, matching query: RecordQuery) throws -> [DeviceRecord] {
        let table = try layout.table(entity)
        var sql = table.selectAll
        var arguments: [DatabaseValue] = []
        var clauses: [String] = []
        for condition in query.conditions {
            _ = try RecordQuery.checkedAttribute(condition.attribute, of: entity, schema: layout.schema)
            let column = SQLiteLayout.quote(condition.attribute)
            if condition.value.isNull {
                switch condition.comparison {
                case .equal: clauses.append("\(column) IS NULL")
                case .notEqual: clauses.append("\(column) IS NOT NULL")
                default: clauses.append("0")
                }
                continue
            }
            let op = switch condition.comparison {
            case .equal: "="
            case .notEqual: "<>"
            case .less: "<"
            case .lessOrEqual: "<="
            case .greater: ">"
            case .greaterOrEqual: ">="
            }
            clauses.append("\(column) \(op) ?")
            arguments.append(condition.value.databaseValue)
        }
        if !clauses.isEmpty { sql += " WHERE " + clauses.joined(separator: " AND ") }
        var order: [String] = []
        for key in query.order {
            _ = try RecordQuery.checkedAttribute(key.attribute, of: entity, schema: layout.schema)
            order.append("\(SQLiteLayout.quote(key.attribute)) \(key.ascending ? "ASC" : "DESC")")
        }
        order.append("\"id\" ASC")
        sql += " ORDER BY " + order.joined(separator: ", ")
        if let limit = query.limit {
            sql += " LIMIT ?"
            arguments.append(Int64(max(0, limit)).databaseValue)
        }
        return try Row.fetchAll(db.makeStatement(sql: sql), arguments: StatementArguments(arguments)).map { decode($0, table) }
    }

    func removeAllRecords() throws {
        for table in layout.tables.values {
            try db.execute(sql: "DELETE FROM \(SQLiteLayout.quote(table.name))")
        }
    }

    private func decode(_ row: Row, _ table: SQLiteLayout.Table) -> DeviceRecord {
        var attributes: Attributes = [:]
        attributes.reserveCapacity(table.attributes.count)
        for (index, attribute) in table.attributes.enumerated() {
            let value: DatabaseValue = row[index + 2]
            attributes[attribute.name] = JSONValue(value, as: attribute.type)
        }
        let id: Int64 = row[0]
        let revision: Int64 = row[1]
        return DeviceRecord(id: id, revision: revision, attributes: attributes)
    }

    // MARK: Meta

    func meta() throws -> DeviceMeta {
        try Self.readMeta(db)
    }

    /// The counters, readable before any schema is known.
    static func readMeta(_ db: Database) throws -> DeviceMeta {
        var meta = DeviceMeta()
        let rows = try Row.fetchAll(db.cachedStatement(sql: "SELECT key, value FROM revsync_meta"))
        for row in rows {
            let key: String = row[0]
            let value: DatabaseValue = row[1]
            if key == MetaKey.history, case .string(let text) = value.storage {
                meta.history = text
                continue
            }
            guard case .int64(let number) = value.storage else { continue }
            switch key {
            case MetaKey.maxRevision: meta.maxRevision = number
            case MetaKey.nextSeq: meta.nextSeq = number
            case MetaKey.nextTemporaryId: meta.nextTemporaryId = number
            case MetaKey.bootstrapped: meta.bootstrapped = number != 0
            case MetaKey.needsResync: meta.needsResync = number != 0
            case MetaKey.committedThrough: meta.committedThrough = number
            default: continue
            }
        }
        return meta
    }

    func setMeta(_ meta: DeviceMeta) throws {
        try Self.writeMeta(meta, db)
    }

    /// Writes the counters, before any schema is known.
    static func writeMeta(_ meta: DeviceMeta, _ db: Database) throws {
        let statement = try db.cachedStatement(sql: "INSERT OR REPLACE INTO revsync_meta (key, value) VALUES (?, ?)")
        try statement.execute(arguments: [MetaKey.maxRevision, meta.maxRevision])
        try statement.execute(arguments: [MetaKey.nextSeq, meta.nextSeq])
        try statement.execute(arguments: [MetaKey.nextTemporaryId, meta.nextTemporaryId])
        try statement.execute(arguments: [MetaKey.bootstrapped, meta.bootstrapped ? 1 : 0])
        try statement.execute(arguments: [MetaKey.needsResync, meta.needsResync ? 1 : 0])
        try statement.execute(arguments: [MetaKey.history, meta.history])
        try statement.execute(arguments: [MetaKey.committedThrough, meta.committedThrough])
    }

    // MARK: Outbox

    func outbox() throws -> [ChangeSet] {
        let rows = try Row.fetchAll(db.cachedStatement(sql: "SELECT seq, change_set FROM revsync_outbox ORDER BY seq"))
        return try rows.map { row in
            let seq: Int64 = row[0]
            let text: String = row[1]
            var changeSet = try decoder.decode(ChangeSet.self, from: Data(text.utf8))
            changeSet.seq = seq
            return changeSet
        }
    }

    func appendToOutbox(_ changeSet: ChangeSet) throws {
        guard let seq = changeSet.seq else { throw DeviceError.unsupportedEdit("an outbox change set needs a seq") }
        try db.cachedStatement(sql: "INSERT INTO revsync_outbox (seq, change_set) VALUES (?, ?)")
            .execute(arguments: [seq, try encoded(changeSet)])
    }

    func replaceInOutbox(_ changeSet: ChangeSet) throws {
        guard let seq = changeSet.seq else { throw DeviceError.unsupportedEdit("an outbox change set needs a seq") }
        try db.cachedStatement(sql: "UPDATE revsync_outbox SET change_set = ? WHERE seq = ?")
            .execute(arguments: [try encoded(changeSet), seq])
    }

    func removeFromOutbox(seq: Int64) throws {
        try db.cachedStatement(sql: "DELETE FROM revsync_outbox WHERE seq = ?").execute(arguments: [seq])
    }

    private func encoded(_ changeSet: ChangeSet) throws -> String {
        String(decoding: try encoder.encode(changeSet), as: UTF8.self)
    }

    // MARK: Temporary ids

    func temporaryIdMapping(_ temporaryId: Int64) throws -> TemporaryIdMapping? {
        let statement = try db.cachedStatement(sql: "SELECT entity, permanent_id FROM revsync_temporary_ids WHERE temporary_id = ?")
        return try Row.fetchOne(statement, arguments: [temporaryId]).map { row in
            TemporaryIdMapping(entity: row[0], id: row[1])
        }
    }

    func setTemporaryIdMapping(_ temporaryId: Int64, to mapping: TemporaryIdMapping) throws {
        try db.cachedStatement(sql: "INSERT OR REPLACE INTO revsync_temporary_ids (temporary_id, entity, permanent_id) VALUES (?, ?, ?)")
            .execute(arguments: [temporaryId, mapping.entity, mapping.id])
    }

    func renamedTemporaryId(_ entity: String, _ temporaryId: Int64) throws -> Int64? {
        let statement = try db.cachedStatement(
            sql: "SELECT renamed_to FROM revsync_temporary_id_renames WHERE entity = ? AND temporary_id = ?")
        return try Int64.fetchOne(statement, arguments: [entity, temporaryId])
    }

    func setRenamedTemporaryId(_ entity: String, from temporaryId: Int64, to renamed: Int64) throws {
        try db.cachedStatement(
            sql: "INSERT OR REPLACE INTO revsync_temporary_id_renames (entity, temporary_id, renamed_to) VALUES (?, ?, ?)"
        ).execute(arguments: [entity, temporaryId, renamed])
    }

    // MARK: Conflicts

    /// Stores notifications so they survive until the app dismisses them; returns them with their ids.
    func saveConflicts(_ conflicts: [ConflictNotification]) throws -> [ConflictNotification] {
        try conflicts.map { conflict in
            try db.cachedStatement(sql: "INSERT INTO revsync_conflicts (notification) VALUES (?)")
                .execute(arguments: [String(decoding: try encoder.encode(conflict), as: UTF8.self)])
            var stored = conflict
            stored.id = db.lastInsertedRowID
            return stored
        }
    }

    func storedConflicts() throws -> [ConflictNotification] {
        try Row.fetchAll(db, sql: "SELECT id, notification FROM revsync_conflicts ORDER BY id").map { row in
            let text: String = row[1]
            var conflict = try decoder.decode(ConflictNotification.self, from: Data(text.utf8))
            conflict.id = row[0]
            return conflict
        }
    }

    func dismissConflicts(through id: Int64) throws {
        try db.execute(sql: "DELETE FROM revsync_conflicts WHERE id <= ?", arguments: [id])
    }
}
