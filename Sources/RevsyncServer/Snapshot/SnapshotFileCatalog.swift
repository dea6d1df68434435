import Foundation
import NIOCore
import RevsyncGzip
import RevsyncSnapshotFile

/// The snapshot files of one directory, named after what they hold:
/// `snapshot-<database>-r<revision>-v<schema version>-<sha-256>.sqlite` (the database's
/// history id, `revsync_head.history`, so that a directory kept across a reset or shared by
/// two deployments never serves one's file to the other, nor a file of revisions a database
/// that went back numbers again, `HistoryRules`), and beside it the same
/// bytes gzip-compressed (`….sqlite.gz`). A file is written under a scratch name and
/// renamed into place whole, the gzip copy first, so a name found is a complete file,
/// whichever instance wrote it.
struct SnapshotFileCatalog: Sendable {
    /// A published snapshot file.
    struct File: Sendable, Hashable {
        let directory: String
        /// The database's history id, 32 lowercase hex digits.
        let database: String
        let revision: Int64
        let schemaVersion: Int
        /// SHA-256 of the SQLite file (not of its gzip copy), lowercase hex.
        let digest: String
        let size: Int
        let gzipSize: Int?

        var name: String { "snapshot-\(database)-r\(revision)-v\(schemaVersion)-\(digest).sqlite" }
        var path: String { directory + "/" + name }
        var gzipPath: String { path + ".gz" }
        /// Both its files are still in the directory (another instance sharing it, or a cleaner
        /// of the temporary directory, may have removed them).
        var isOnDisk: Bool {
            FileManager.default.fileExists(atPath: path) && (gzipSize == nil || FileManager.default.fileExists(atPath: gzipPath))
        }
        /// One tag per file and encoding: a range request resumes only the bytes it started on.
        var etag: String { "\"r\(revision)-\(digest.prefix(16))\"" }
        var gzipETag: String { "\"r\(revision)-\(digest.prefix(16))-gzip\"" }
    }

    let directory: String

    /// The parts of a published file's name; nil for any other name.
    static func parse(_ name: String) -> (database: String, revision: Int64, schemaVersion: Int, digest: String)? {
        guard name.hasPrefix("snapshot-"), name.hasSuffix(".sqlite") else { return nil }
        let parts = name.dropFirst("snapshot-".count).dropLast(".sqlite".count).split(separator: "-")
        func isHex(_ part: Substring, count: Int) -> Bool { part.count == count && part.allSatisfy { $0.isHexDigit && !$0.isUppercase } }
        guard parts.count == 4, isHex(parts[0], count: 32), parts[1].hasPrefix("r"), let revision = Int64(parts[1].dropFirst()),
            parts[2].hasPrefix("v"), let version = Int(parts[2].dropFirst()), isHex(parts[3], count: 64)
        else { return nil }
        return (String(parts[0]), revision, version, String(parts[3]))
    }

    /// The database's history id as file names carry it (`revsync_head.history` without dashes).
    static func databaseName(_ history: String) -> String {
        history.lowercased().filter { $0 != "-" }
    }

    /// The complete file of `database` for `schemaVersion` published last, if any: by
    /// publication, not revision, so that after a database was restored from a backup the files
    /// rebuilt at its lower revisions win over the ones it had.
    func newest(database: String, schemaVersion: Int) -> File? {
        let published = files(database: database, schemaVersion: schemaVersion).map { file in
            (file: file, modified: Self.modification(of: file.path) ?? .distantPast)
        }
        return published.max { ($0.modified, $0.file.revision) < ($1.modified, $1.file.revision) }?.file
    }

    func files(database: String, schemaVersion: Int) -> [File] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        return names.compactMap { name -> File? in
            guard let parts = Self.parse(name), parts.database == database, parts.schemaVersion == schemaVersion else { return nil }
            return file(database: database, revision: parts.revision, schemaVersion: parts.schemaVersion, digest: parts.digest)
        }
    }

    /// When the file or directory at `path` was last modified (for a published file, about when
    /// it was published: renaming it into place keeps its time); nil when there is none.
    static func modification(of path: String) -> Date? {
        (try? FileManager.default.attributesOfItem(atPath: path))?[.modificationDate] as? Date
    }

    /// Removes what `SnapshotDirectorySweep` finds replaced or left over; returns the names removed.
    @discardableResult
    func sweep(keepReplaced: Duration, now: Date = Date()) -> [String] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        let entries = names.compactMap { name in
            Self.modification(of: directory + "/" + name).map { SnapshotDirectorySweep.Entry(name: name, modified: $0) }
        }
        return SnapshotDirectorySweep(keepReplaced: keepReplaced).removals(entries, now: now).filter { name in
            (try? FileManager.default.removeItem(atPath: directory + "/" + name)) != nil
        }
    }

    private func file(database: String, revision: Int64, schemaVersion: Int, digest: String) -> File? {
        let probe = File(
            directory: directory, database: database, revision: revision, schemaVersion: schemaVersion, digest: digest, size: 0, gzipSize: nil)
        guard let size = fileSize(atPath: probe.path) else { return nil }
        return File(
            directory: directory, database: database, revision: revision, schemaVersion: schemaVersion, digest: digest, size: size,
            gzipSize: fileSize(atPath: probe.gzipPath))
    }

    /// A scratch path for a file being built, in the instance's work directory (inside this
    /// one, so that publishing is a rename within one file system).
    func scratchPath(in work: SnapshotWorkDirectory) throws -> String {
        try work.path() + "/building-\(UUID().uuidString.lowercased()).sqlite"
    }

    /// Digests and compresses the finished file at `scratch` and renames both into place.
    func publish(scratch: String, database: String, revision: Int64, schemaVersion: Int) throws -> File {
        let digest = try FileDigest.sha256(ofFileAt: scratch)
        let scratchGzip = scratch + ".gz"
        defer { try? FileManager.default.removeItem(atPath: scratchGzip) }
        try Self.compress(scratch, to: scratchGzip)
        let probe = File(
            directory: directory, database: database, revision: revision, schemaVersion: schemaVersion, digest: digest, size: 0, gzipSize: nil)
        try Self.rename(scratchGzip, to: probe.gzipPath)
        try Self.rename(scratch, to: probe.path)
        guard let file = file(database: database, revision: revision, schemaVersion: schemaVersion, digest: digest) else {
            throw CocoaError(.fileNoSuchFile, userInfo: [NSFilePathErrorKey: probe.path])
        }
        return file
    }

    /// `rename(2)`: atomic within the directory, and replaces a file another instance published under the same name.
    static func rename(_ from: String, to: String) throws {
        guard Foundation.rename(from, to) == 0 else {
            throw CocoaError(.fileWriteUnknown, userInfo: [NSFilePathErrorKey: to, NSLocalizedDescriptionKey: String(cString: strerror(errno))])
        }
    }

    /// One gzip member of the file, written 1 MiB at a time.
    static func compress(_ source: String, to target: String) throws {
        guard FileManager.default.createFile(atPath: target, contents: nil), let output = FileHandle(forWritingAtPath: target),
            let input = FileHandle(forReadingAtPath: source)
        else { throw CocoaError(.fileWriteUnknown, userInfo: [NSFilePathErrorKey: target]) }
        defer {
            try? input.close()
            try? output.close()
        }
        let stream = try GzipStream()
        while let chunk = try input.read(upToCount: 1 << 20), !chunk.isEmpty {
            for part in try stream.compress(ByteBuffer(bytes: chunk)) { try output.write(contentsOf: Data(part.readableBytesView)) }
        }
        for part in try stream.finish() { try output.write(contentsOf: Data(part.readableBytesView)) }
    }
}
