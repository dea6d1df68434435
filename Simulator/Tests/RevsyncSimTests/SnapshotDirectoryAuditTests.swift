import Foundation
import Testing
@testable import RevsyncSim

/// The verdict's reading of the snapshot directory the instances share.
@Suite struct SnapshotDirectoryAuditTests {
    static let now = Date(timeIntervalSince1970: 2_000_000_000)

    static func file(_ revision: Int64, group: String = "a-v1", secondsAgo: Double) -> SnapshotDirectoryAudit.Published {
        .init(name: "snapshot-\(group)-r\(revision).sqlite", group: group, revision: revision, modified: now.addingTimeInterval(-secondsAgo))
    }

    @Test func aReplacedFilePastItsGraceAndASweepFailsTheCheck() {
        // Replaced 200 s ago (past 60 + 30 + 15 s), replaced 50 s ago, the last one; another group's lone file.
        let old = Self.file(1, secondsAgo: 900), recent = Self.file(2, secondsAgo: 200), last = Self.file(3, secondsAgo: 50)
        let lone = Self.file(9, group: "b-v1", secondsAgo: 5000)
        let audit = SnapshotDirectoryAudit(published: [last, lone, old, recent], abandoned: [], locked: 2, now: Self.now)
        #expect(audit.overdue == [old.name])
        let check = VerdictChecks.snapshotDirectory(audit, leftByKills: [])
        #expect(!check.passed)
        #expect(check.detail.contains(old.name))

        let swept = SnapshotDirectoryAudit(published: [last, lone, recent], abandoned: [], locked: 2, now: Self.now)
        #expect(VerdictChecks.snapshotDirectory(swept, leftByKills: ["work-x"]).passed)
        #expect(VerdictChecks.snapshotDirectory(swept, leftByKills: ["work-x"]).detail.contains("1 of 1 left by killed instances removed"))
    }

    @Test func aWorkDirectoryOfAGoneInstanceFailsTheCheck() {
        let audit = SnapshotDirectoryAudit(published: [], abandoned: ["work-x"], locked: 1, now: Self.now)
        let check = VerdictChecks.snapshotDirectory(audit, leftByKills: ["work-x"])
        #expect(!check.passed)
        #expect(check.detail.contains("work-x"))
    }

    /// Locked by a running instance, or by nobody: told by taking the lock, which is let go again.
    @Test func readingTellsLockedFromAbandonedWorkDirectories() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("audit-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let fm = FileManager.default
        for name in ["work-live", "work-gone"] {
            try fm.createDirectory(atPath: directory + "/" + name, withIntermediateDirectories: true)
            _ = fm.createFile(atPath: directory + "/" + name + "/lock", contents: nil)
        }
        let held = open(directory + "/work-live/lock", O_RDWR)
        #expect(held >= 0 && flock(held, LOCK_EX | LOCK_NB) == 0)
        defer { close(held) }
        let database = String(repeating: "c", count: 32), digest = String(repeating: "d", count: 64)
        _ = fm.createFile(atPath: directory + "/snapshot-\(database)-r7-v1-\(digest).sqlite", contents: nil)
        _ = fm.createFile(atPath: directory + "/snapshot-\(database)-r7-v1-\(digest).sqlite.gz", contents: nil)

        let audit = SnapshotDirectoryAudit.read(directory)
        #expect(audit.abandoned == ["work-gone"])
        #expect(audit.locked == 1)
        #expect(audit.published.map(\.revision) == [7])
        #expect(audit.published.first?.group == "\(database)-v1")
        #expect(SnapshotDirectoryAudit.abandonedWorkDirectories(in: directory) == ["work-gone"])
        #expect(SnapshotDirectoryAudit.read(directory).abandoned == ["work-gone"], "reading let the lock go")
        #expect(SnapshotDirectoryAudit.removePublished(in: directory) == 2)
        #expect(SnapshotDirectoryAudit.read(directory).published.isEmpty)
    }
}
