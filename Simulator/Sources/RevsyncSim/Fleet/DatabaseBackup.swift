import Foundation

/// A backup of the run's database, as an operator takes one (`pg_dump`) and puts it back
/// (`pg_restore`: the tables dropped and made again from the dump, in one transaction) while
/// the servers run on, as after a failover to a replica that lacked the last commits.
struct DatabaseBackup: Sendable {
    let path: String
    /// The head and history id the dump holds (its `revsync_head`).
    let head: Int64
    let history: String

    /// Dumps the database at `databaseURL` into `path` (custom format, no owners), the commands'
    /// output appended to `logPath`.
    static func take(of databaseURL: String, to path: String, logPath: String) async throws -> DatabaseBackup {
        try await run(["pg_dump", "--format=custom", "--no-owner", "--file=\(path)", "--dbname=\(databaseURL)"], logPath: logPath)
        // The head row as the dump holds it: one consistent snapshot, whatever was committed meanwhile.
        let text = path + ".head.sql"
        defer { try? FileManager.default.removeItem(atPath: text) }
        try await run(["pg_restore", "--data-only", "--table=revsync_head", "--file=\(text)", path], logPath: logPath)
        let (head, history) = try headRow(in: try String(contentsOfFile: text, encoding: .utf8))
        return DatabaseBackup(path: path, head: head, history: history)
    }

    /// Puts the dump back into the database at `databaseURL`. Under running servers its drops can
    /// deadlock with a commit (the restore waits for a table the commit holds while the commit
    /// waits for one the restore has dropped); PostgreSQL then rolls the whole restore back, and it
    /// is run again, as an operator would, up to `attempts` times.
    func restore(into databaseURL: String, logPath: String, attempts: Int = 5) async throws {
        for attempt in 1...attempts {
            do {
                return try await Self.run(
                    ["pg_restore", "--clean", "--if-exists", "--no-owner", "--single-transaction", "--dbname=\(databaseURL)", path],
                    logPath: logPath)
            } catch let error as FleetError where attempt < attempts && "\(error)".contains("deadlock detected") {
                try await Task.sleep(for: .milliseconds(200))
            }
        }
    }

    /// The head and history of `revsync_head`'s COPY block in a plain SQL dump.
    static func headRow(in sql: String) throws -> (head: Int64, history: String) {
        let lines = sql.split(separator: "\n", omittingEmptySubsequences: false)
        guard let copy = lines.firstIndex(where: { $0.hasPrefix("COPY ") && $0.contains("revsync_head") }), copy + 1 < lines.count,
            let open = lines[copy].firstIndex(of: "("), let close = lines[copy].firstIndex(of: ")")
        else { throw FleetError("the dump holds no revsync_head rows") }
        let columns = lines[copy][lines[copy].index(after: open)..<close].split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
        let values = lines[copy + 1].split(separator: "\t", omittingEmptySubsequences: false).map(String.init)
        guard let headAt = columns.firstIndex(of: "head"), let historyAt = columns.firstIndex(of: "history"),
            values.count == columns.count, let head = Int64(values[headAt])
        else { throw FleetError("revsync_head in the dump has no head and history: \(lines[copy]) / \(lines[copy + 1])") }
        return (head, values[historyAt])
    }

    private static func run(_ command: [String], logPath: String) async throws {
        let status = try await CommandRunner.run(command, environment: ProcessInfo.processInfo.environment, logPath: logPath, timeout: .seconds(120))
        guard status == 0 else {
            throw FleetError("`\(command.prefix(2).joined(separator: " "))` failed (exit status \(status)):\n\(LogTail.lastLines(of: logPath))")
        }
    }
}
