import Foundation
import Logging
import PostgresNIO

#if canImport(Glibc)
import Glibc
#endif

/// The processes of a PostgreSQL on this host, stopped and continued with signals: a PostgreSQL
/// frozen while its kernel goes on, as when its storage stalls or its VM is paused. Its sockets
/// stay open and the kernel acknowledges what arrives, keep-alive probes included; nothing
/// answers.
///
/// The postmaster is found as the parent of the backend serving a query of ours, its children
/// in `/proc`. It is stopped first, so that it forks nothing while its children are stopped.
struct PostgresProcesses: Sendable {
    let postmaster: pid_t

    /// The PostgreSQL `databaseURL` reaches, which must run on this host under a user this
    /// process may signal (root, as the soak runs).
    static func of(databaseURL: String, logger: Logger) async throws -> PostgresProcesses {
        // Read while the connection is open: its backend ends with it.
        let postmaster = try await SoakDatabase.withClient(url: databaseURL, logger: logger) { client in
            let rows = try await client.query("SELECT pg_backend_pid()", logger: logger).collect()
            guard let backend = try rows.first?.decode(Int32.self) else { throw SoakError("pg_backend_pid() gave no pid") }
            guard let postmaster = parent(of: backend) else {
                throw SoakError("PostgreSQL's backend \(backend) is not a process of this host (/proc/\(backend) is missing): "
                    + "the postgres-freezes fault needs PostgreSQL on the same host")
            }
            return postmaster
        }
        guard kill(postmaster, 0) == 0 else {
            throw SoakError("PostgreSQL's postmaster \(postmaster) may not be signalled by this process (errno \(errno)): run as root")
        }
        return PostgresProcesses(postmaster: postmaster)
    }

    /// Stops the postmaster, then every child it has.
    func stop() {
        kill(postmaster, SIGSTOP)
        for child in Self.children(of: postmaster) { kill(child, SIGSTOP) }
    }

    /// Continues every child, then the postmaster.
    func resume() {
        for child in Self.children(of: postmaster) { kill(child, SIGCONT) }
        kill(postmaster, SIGCONT)
    }

    /// The parent of `pid`, from `/proc/<pid>/status`.
    static func parent(of pid: Int32) -> pid_t? {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return nil }
        for line in status.split(separator: "\n") where line.hasPrefix("PPid:") {
            return pid_t(line.dropFirst(5).trimmingCharacters(in: .whitespaces))
        }
        return nil
    }

    /// Every process whose parent is `pid`.
    static func children(of pid: pid_t) -> [pid_t] {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        return entries.compactMap { pid_t($0) }.filter { parent(of: $0) == pid }
    }
}
