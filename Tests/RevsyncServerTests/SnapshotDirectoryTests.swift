import Foundation
import Testing
@testable import RevsyncServer

/// What a sweep of the snapshot directory removes, decided from names and times alone.
@Suite struct SnapshotDirectorySweepTests {
    static let database = String(repeating: "a", count: 32)
    static let other = String(repeating: "b", count: 32)
    static let now = Date(timeIntervalSince1970: 2_000_000_000)

    static func published(_ revision: Int64, database: String = database, version: Int = 1, secondsAgo: Double) -> SnapshotDirectorySweep.Entry {
        let digest = String(String(revision, radix: 16).reversed()).padding(toLength: 64, withPad: "0", startingAt: 0)
        return .init(name: "snapshot-\(database)-r\(revision)-v\(version)-\(digest).sqlite", modified: now.addingTimeInterval(-secondsAgo))
    }

    static func removals(_ entries: [SnapshotDirectorySweep.Entry], keep: Duration = .seconds(600)) -> Set<String> {
        Set(SnapshotDirectorySweep(keepReplaced: keep).removals(entries, now: now))
    }

    @Test func aReplacedFileGoesOnceItsSuccessorIsOlderThanTheGrace() {
        let old = Self.published(10, secondsAgo: 5000), middle = Self.published(20, secondsAgo: 700), last = Self.published(30, secondsAgo: 100)
        // `old` was replaced 700 s ago (past 600): it goes with its gzip copy; `middle` 100 s ago: it stays; the last file always stays.
        #expect(Self.removals([last, old, middle]) == [old.name, old.name + ".gz"])
        #expect(Self.removals([last, old, middle], keep: .seconds(60)) == [old.name, old.name + ".gz", middle.name, middle.name + ".gz"])
        #expect(Self.removals([old]) == [], "a lone file is the one served, however old")
    }

    @Test func eachDatabaseAndSchemaVersionKeepsItsLastFile() {
        let mine = Self.published(10, secondsAgo: 5000)
        let otherDatabase = Self.published(50, database: Self.other, secondsAgo: 100)
        let newerSchema = Self.published(60, version: 2, secondsAgo: 1000)
        #expect(Self.removals([mine, otherDatabase, newerSchema]) == [])
    }

    /// A database restored from a backup has its files rebuilt at lower revisions than the ones it
    /// had: publication, not revision, says which file replaced which.
    @Test func theFilePublishedLastWinsOverAHigherRevision() {
        let ahead = Self.published(900, secondsAgo: 5000), rebuilt = Self.published(300, secondsAgo: 1000)
        #expect(Self.removals([ahead, rebuilt]) == [ahead.name, ahead.name + ".gz"])
    }

    @Test func leftoversGoAfterADayAndOtherNamesStay() {
        let day: Double = 86_400
        let file = Self.published(10, secondsAgo: 10)
        let orphanCopy = SnapshotDirectorySweep.Entry(name: Self.published(5, secondsAgo: 0).name + ".gz", modified: Self.now.addingTimeInterval(-day - 1))
        let freshOrphan = SnapshotDirectorySweep.Entry(name: Self.published(6, secondsAgo: 0).name + ".gz", modified: Self.now.addingTimeInterval(-60))
        let oldScratch = SnapshotDirectorySweep.Entry(name: "building-1234.sqlite", modified: Self.now.addingTimeInterval(-day - 1))
        let oldSpool = SnapshotDirectorySweep.Entry(name: "spool-77-abcdef12", modified: Self.now.addingTimeInterval(-day - 1))
        let freshScratch = SnapshotDirectorySweep.Entry(name: "building-5678.sqlite", modified: Self.now.addingTimeInterval(-60))
        let operators = SnapshotDirectorySweep.Entry(name: "README", modified: Self.now.addingTimeInterval(-10 * day))
        let copyOfTheFile = SnapshotDirectorySweep.Entry(name: file.name + ".gz", modified: Self.now.addingTimeInterval(-day - 1))
        #expect(Self.removals([file, orphanCopy, freshOrphan, oldScratch, oldSpool, freshScratch, operators, copyOfTheFile])
            == [orphanCopy.name, oldScratch.name, oldSpool.name])
    }
}

/// Work directories: a live instance's is kept by every sweep, a gone one's removed.
@Suite struct SnapshotWorkDirectoryTests {
    static func withDirectory(_ body: (String) throws -> Void) throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("snapshot-work-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try body(directory)
    }

    static func names(_ directory: String) -> Set<String> {
        Set((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? [])
    }

    @Test func aWorkDirectoryWhoseLockIsReleasedIsRemovedAndALockedOneKept() throws {
        try Self.withDirectory { directory in
            let live = SnapshotWorkDirectory(parent: directory)
            let livePath = try live.path()
            var gone: SnapshotWorkDirectory? = SnapshotWorkDirectory(parent: directory)
            let gonePath = try #require(try gone?.path())
            _ = FileManager.default.createFile(atPath: gonePath + "/building-1.sqlite", contents: Data(count: 100))
            _ = FileManager.default.createFile(atPath: gonePath + "/snapshot-2.json.gz", contents: Data(count: 100))
            let sweeper = SnapshotWorkDirectory(parent: directory)
            _ = try sweeper.path()
            #expect(SnapshotWorkDirectory.removeAbandoned(in: directory, keeping: sweeper) == 0, "both owners hold their locks")
            // Its process ended (the kernel closes its files, which releases the lock), the directory stayed.
            gone = nil
            #expect(FileManager.default.fileExists(atPath: gonePath))
            #expect(SnapshotWorkDirectory.removeAbandoned(in: directory, keeping: sweeper) == 1)
            #expect(!FileManager.default.fileExists(atPath: gonePath))
            #expect(FileManager.default.fileExists(atPath: livePath))
            #expect(try live.path() == livePath)
            live.remove()
            #expect(!FileManager.default.fileExists(atPath: livePath))
        }
    }

    @Test func pendingDirectoriesGoAfterAnHourAndForeignOnesStay() throws {
        try Self.withDirectory { directory in
            let fm = FileManager.default
            try fm.createDirectory(atPath: directory + "/pending-work-old", withIntermediateDirectories: true)
            try fm.createDirectory(atPath: directory + "/pending-work-new", withIntermediateDirectories: true)
            try fm.createDirectory(atPath: directory + "/work-without-lock", withIntermediateDirectories: true)
            try fm.setAttributes([.modificationDate: Date().addingTimeInterval(-3700)], ofItemAtPath: directory + "/pending-work-old")
            #expect(SnapshotWorkDirectory.removeAbandoned(in: directory, keeping: nil) == 1)
            #expect(Self.names(directory) == ["pending-work-new", "work-without-lock"])
        }
    }

    /// Removed under the instance (a cleaner of the temporary directory): made again, locked.
    @Test func aWorkDirectoryRemovedUnderItsOwnerIsMadeAgain() throws {
        try Self.withDirectory { directory in
            let work = SnapshotWorkDirectory(parent: directory)
            let first = try work.path()
            try FileManager.default.removeItem(atPath: first)
            let second = try work.path()
            #expect(second != first)
            #expect(FileManager.default.fileExists(atPath: second + "/lock"))
            #expect(SnapshotWorkDirectory.removeAbandoned(in: directory, keeping: nil) == 0, "its new lock is held")
        }
    }
}
