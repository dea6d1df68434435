import Foundation
import GRDB
import RevsyncSnapshotFile
import RevsyncWire
import Testing

/// A snapshot file as the server writes it, and the checks a device runs before loading one.
@Suite struct SnapshotFileCheckTests {
    static let tables = [
        SnapshotTable(name: "teams", attributes: [
            AttributeDescription(name: "name", type: .string, nullable: false),
            AttributeDescription(name: "founded", type: .timestamp, nullable: true),
        ]),
        SnapshotTable(name: "players", attributes: [
            AttributeDescription(name: "team_id", type: .integer, nullable: false, references: "teams", onDelete: .cascade),
            AttributeDescription(name: "rating", type: .double, nullable: true),
            AttributeDescription(name: "active", type: .boolean, nullable: false),
        ]),
    ]

    func written(players: Int = 500) async throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("snapshot-check-\(UUID().uuidString).sqlite").path
        let writer = try SnapshotFileWriter(path: path, tables: Self.tables)
        try await writer.append(
            [
                SnapshotRow(id: 1, revision: 3, values: ["Owls", "1901-02-03 04:05:06+00"]),
                SnapshotRow(id: 2, revision: 9, values: ["Hawks", .null]),
            ], to: "teams")
        let rows = (1...players).map { index -> SnapshotRow in
            let values: [JSONValue] = [.integer(1), .double(Double(index) / 4), .bool(index % 2 == 0)]
            return SnapshotRow(id: Int64(index), revision: Int64(index % 7), values: values)
        }
        try await writer.append(rows, to: "players")
        try await writer.finish(revision: 42, schemaVersion: 3)
        return path
    }

    @Test func aWrittenFileChecksOutAndHoldsItsRowsAsTheDeviceStoresThem() async throws {
        let path = try await written()
        defer { try? FileManager.default.removeItem(atPath: path) }
        let meta = try SnapshotFileCheck.check(path: path, tables: Self.tables, schemaVersion: 3)
        #expect(meta.revision == 42 && meta.schemaVersion == 3)
        #expect(meta.totals["players"]?.records == 500 && meta.totals["teams"]?.records == 2)
        #expect(meta.records == 502)

        let queue = try DatabaseQueue(path: path)
        let team = try #require(try await queue.read { try Row.fetchOne($0, sql: "SELECT * FROM teams WHERE id = 1") })
        #expect(team["name"] == "Owls" && team["revision"] == 3)
        #expect(JSONValue(team["founded"] as DatabaseValue, as: .timestamp) == "1901-02-03 04:05:06+00")
        let player = try #require(try await queue.read { try Row.fetchOne($0, sql: "SELECT * FROM players WHERE id = 2") })
        #expect(JSONValue(player["active"] as DatabaseValue, as: .boolean) == .bool(true))
        #expect(JSONValue(player["rating"] as DatabaseValue, as: .double) == .double(0.5))
        let indexes = try await queue.read { try String.fetchAll($0, sql: "SELECT name FROM sqlite_master WHERE type = 'index'") }
        #expect(indexes.contains("revsync_players_team_id"))
        try queue.close()
    }

    @Test func aTruncatedFileIsCorrupt() async throws {
        let path = try await written(players: 5_000)
        defer { try? FileManager.default.removeItem(atPath: path) }
        let handle = try #require(FileHandle(forUpdatingAtPath: path))
        let size = try handle.seekToEnd()
        try handle.truncate(atOffset: size / 2)
        try handle.close()
        #expect(throws: SnapshotFileProblem.self) { try SnapshotFileCheck.check(path: path, tables: Self.tables, schemaVersion: 3) }
        do {
            _ = try SnapshotFileCheck.check(path: path, tables: Self.tables, schemaVersion: 3)
        } catch {
            guard case .corrupt = error else { Issue.record("a truncated file is \(error)"); return }
        }
    }

    @Test func bytesThatAreNotSQLiteAreCorrupt() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("not-sqlite-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        FileManager.default.createFile(atPath: path, contents: Data(repeating: 0x41, count: 8192))
        do {
            _ = try SnapshotFileCheck.check(path: path, tables: Self.tables, schemaVersion: 3)
            Issue.record("a file of 'A's checked out")
        } catch {
            guard case .corrupt = error else { Issue.record("it is \(error)"); return }
        }
    }

    @Test func aTableThatLostRowsIsCorrupt() async throws {
        let path = try await written()
        defer { try? FileManager.default.removeItem(atPath: path) }
        let queue = try DatabaseQueue(path: path)
        try await queue.write { try $0.execute(sql: "DELETE FROM players WHERE id = 17") }
        try queue.close()
        do {
            _ = try SnapshotFileCheck.check(path: path, tables: Self.tables, schemaVersion: 3)
            Issue.record("a file missing a row checked out")
        } catch {
            guard case .corrupt(let message) = error else { Issue.record("it is \(error)"); return }
            #expect(message.contains("players holds 499 records"))
        }
    }

    @Test func anotherSchemaVersionOrAMissingColumnIsAnotherSchema() async throws {
        let path = try await written()
        defer { try? FileManager.default.removeItem(atPath: path) }
        do {
            _ = try SnapshotFileCheck.check(path: path, tables: Self.tables, schemaVersion: 4)
            Issue.record("version 3 passed for 4")
        } catch {
            #expect(error == .otherSchema("schema version 3, the device's is 4"))
        }
        var wider = Self.tables
        wider[1] = SnapshotTable(name: "players", attributes: wider[1].attributes + [AttributeDescription(name: "nickname", type: .string, nullable: true)])
        do {
            _ = try SnapshotFileCheck.check(path: path, tables: wider, schemaVersion: 3)
            Issue.record("a missing column passed")
        } catch {
            #expect(error == .otherSchema("table players has no column nickname"))
        }
    }
}
