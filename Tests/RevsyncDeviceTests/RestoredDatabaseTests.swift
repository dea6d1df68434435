import Foundation
import RevsyncServer
import RevsyncTestSupport
import RevsyncWire
import Testing

@testable import RevsyncDevice

/// The server's database restored from a backup while devices held what was committed after
/// it: the database numbers its next commits as revisions those devices already hold with
/// other contents. Its history id is renewed (`HistoryRules`), and the devices load a new
/// snapshot, keeping their pending edits, instead of catching up past revisions the database
/// no longer has. Against the live server, with a real `pg_dump` and `pg_restore`.
@Suite("A server database restored from a backup", .serialized)
struct RestoredDatabaseTests {
    static func note(_ body: String) -> Attributes { ["body": .string(body), "pinned": false] }

    static func bodies(_ records: [DeviceRecord]) -> [String] {
        records.compactMap { $0.attributes["body"]?.stringValue }.sorted()
    }

    @Test(.timeLimit(.minutes(3)))
    func devicesReloadTheRestoredDatabaseAndKeepTheirPendingEdits() async throws {
        try await withLiveDevices(configure: { $0.historyCheckInterval = .milliseconds(50) }) { devices in
            let url = devices.live.server.settings.databaseURL
            let history = PostgresHistory(database: devices.live.server.database)
            let a = try await devices.bootstrapped("a")
            let b = try await devices.bootstrapped("b")
            try await a.transaction { tx in _ = try tx.create("notes", Self.note("kept")) }
            try await a.syncOnce()
            let backup = try DatabaseBackup.take(of: url)
            defer { backup.remove() }

            // Committed after the backup, and held by both devices.
            for n in 1...3 {
                try await a.transaction { tx in _ = try tx.create("notes", Self.note("lost \(n)")) }
                try await a.syncOnce()
            }
            try await b.syncOnce()
            let held = try await b.status()
            #expect(Self.bodies(try await b.records("notes")) == ["kept", "lost 1", "lost 2", "lost 3"])
            let old = try #require(held.history)

            try backup.restore(into: url)
            // The instance saw revisions the database no longer has: it renews the id.
            try await withTimeout("the history id renewed") { try await history.read().id != old }
            // B edits offline meanwhile; A writes past the revision B holds.
            try await b.transaction { tx in _ = try tx.create("notes", Self.note("pending on b")) }
            for n in 1...5 {
                try await a.transaction { tx in _ = try tx.create("notes", Self.note("after \(n)")) }
                try await a.syncOnce()
            }
            #expect(try await history.read().head > held.maxRevision)

            let report = try await b.syncOnce()
            #expect(report.bootstrapped)
            let notes = Self.bodies(try await b.records("notes"))
            #expect(notes == ["after 1", "after 2", "after 3", "after 4", "after 5", "kept", "pending on b"])
            #expect(try await devices.localRecords(b) == devices.serverRecords())
            #expect(try await b.status().history == history.read().id)
            #expect(try await b.pendingChangeSets().isEmpty)
        }
    }

    private func withTimeout(_ what: String, _ condition: () async throws -> Bool) async throws {
        let deadline = ContinuousClock.now + .seconds(30)
        while try await !condition() {
            guard ContinuousClock.now < deadline else { throw TestSetupError("\(what) did not happen within 30 s") }
            try await Task.sleep(for: .milliseconds(20))
        }
    }
}
