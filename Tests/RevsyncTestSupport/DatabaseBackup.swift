import Foundation

/// A backup of a test database taken with `pg_dump` and put back with `pg_restore`, as an
/// operator restores one: the tables dropped and made again from the dump, in one
/// transaction, while servers stay connected.
public struct DatabaseBackup: Sendable {
    public let path: String

    /// Dumps the database at `url` (custom format, no owners).
    public static func take(of url: String) throws -> DatabaseBackup {
        let path = NSTemporaryDirectory() + "/revsync-backup-\(UUID().uuidString).dump"
        try run("pg_dump", ["--format=custom", "--no-owner", "--file=\(path)", "--dbname=\(url)"])
        return DatabaseBackup(path: path)
    }

    /// Puts the dump back into the database at `url`.
    public func restore(into url: String) throws {
        try Self.run("pg_restore", ["--clean", "--if-exists", "--no-owner", "--single-transaction", "--dbname=\(url)", path])
    }

    public func remove() { try? FileManager.default.removeItem(atPath: path) }

    private static func run(_ tool: String, _ arguments: [String]) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = [tool] + arguments
        let errors = Pipe()
        process.standardError = errors
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        let message = errors.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw TestSetupError("\(tool) failed (\(process.terminationStatus)): \(String(decoding: message, as: UTF8.self))")
        }
    }
}
