import Foundation
import GRDB
import RevsyncSnapshotFile
import RevsyncWire
import Testing

/// The writer binds each row's values through SQLite's own calls (`SnapshotRowInsert`): what it
/// stores must be what the device stores for the same values (`JSONValue.databaseValue`).
@Suite struct SnapshotFileWriterTests {
    static let table = SnapshotTable(name: "notes", attributes: [
        AttributeDescription(name: "body", type: .string, nullable: true),
        AttributeDescription(name: "count", type: .integer, nullable: true),
        AttributeDescription(name: "ratio", type: .double, nullable: true),
        AttributeDescription(name: "pinned", type: .boolean, nullable: true),
    ])

    func path() -> String {
        FileManager.default.temporaryDirectory.appendingPathComponent("snapshot-writer-\(UUID().uuidString).sqlite").path
    }

    @Test func everyValueIsStoredAsTheDeviceStoresIt() async throws {
        let rows: [SnapshotRow] = [
            SnapshotRow(id: 1, revision: 7, values: ["", .integer(0), .double(0), .bool(false)]),
            SnapshotRow(id: 2, revision: .max, values: ["tab\tquote\"", .integer(.min), .double(-1.5e300), .bool(true)]),
            SnapshotRow(id: 3, revision: 0, values: [.string("ünïcödé 🎉 " + String(repeating: "long ", count: 2_000)), .integer(.max), .double(0.1), .null]),
            SnapshotRow(id: 4, revision: 1, values: [.null, .null, .null, .unsupported]),
            SnapshotRow(id: -5, revision: 2, values: [.unsupported, .integer(-1), .double(.infinity), .bool(true)]),
        ]
        let path = path()
        defer { try? FileManager.default.removeItem(atPath: path) }
        let writer = try SnapshotFileWriter(path: path, tables: [Self.table])
        try await writer.append(rows, to: "notes")
        try await writer.finish(revision: 9, schemaVersion: 1)

        let queue = try DatabaseQueue(path: path)
        let stored = try await queue.read { try Row.fetchAll($0, sql: "SELECT * FROM notes ORDER BY id") }
        try queue.close()
        #expect(stored.count == rows.count)
        for row in rows {
            let found = try #require(stored.first { $0["id"] as Int64 == row.id })
            let expected = [row.id.databaseValue, row.revision.databaseValue] + row.values.map(\.databaseValue)
            let columns = Self.table.columns.map { found[$0] as DatabaseValue }
            #expect(columns == expected, "row \(row.id)")
        }
        // The empty string is stored as text, not NULL.
        let types = try await DatabaseQueue(path: path).read { try String.fetchAll($0, sql: "SELECT typeof(body) FROM notes WHERE id = 1") }
        #expect(types == ["text"])
    }

    @Test func aRowOfTheWrongWidthOrABrokenConstraintIsAnErrorAndTheWriterGoesOn() async throws {
        let path = path()
        defer { try? FileManager.default.removeItem(atPath: path) }
        let writer = try SnapshotFileWriter(path: path, tables: [Self.table])
        let short = SnapshotRow(id: 1, revision: 1, values: ["only one"])
        let error = await #expect(throws: DatabaseError.self) { try await writer.append([short], to: "notes") }
        #expect(error?.message?.contains("a row of 3 values for a statement of 6 parameters") == true)

        let row = SnapshotRow(id: 1, revision: 1, values: ["first", .integer(1), .double(1), .bool(true)])
        try await writer.append([row], to: "notes")
        let twice = await #expect(throws: DatabaseError.self) { try await writer.append([row], to: "notes") }
        #expect(twice?.resultCode == .SQLITE_CONSTRAINT)
        try await writer.append([SnapshotRow(id: 2, revision: 1, values: ["second", .null, .null, .null])], to: "notes")
        try await writer.finish(revision: 1, schemaVersion: 1)

        let bodies = try await DatabaseQueue(path: path).read { try String.fetchAll($0, sql: "SELECT body FROM notes ORDER BY id") }
        #expect(bodies == ["first", "second"])
    }
}
