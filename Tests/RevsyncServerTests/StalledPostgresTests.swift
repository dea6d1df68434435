import Foundation
import NIOCore
import PostgresNIO
import RevsyncTestSupport
import RevsyncWire
import Synchronization
import Testing
@testable import RevsyncServer

#if canImport(Glibc)
import Glibc
#endif

/// A PostgreSQL that stops answering while its kernel goes on (a stalled disk, a paused VM, a
/// stopped process): its own `statement_timeout` cannot run, and TCP keep-alive is answered by
/// the kernel. Before `ConnectionLeaseWatch`, a request whose statement was in flight waited
/// for as long as the freeze lasted. Here one backend, the one serving the instance's batch,
/// is stopped with SIGSTOP; the rest of PostgreSQL runs on.
///
/// Run alone, after the other tests (`Scripts/test` sets REVSYNC_ALONE_TESTS=1): while one
/// backend of the stack's PostgreSQL is stopped, every `DROP DATABASE` in it waits for that
/// backend (PostgreSQL 15 makes each backend acknowledge a drop), so each test of the suite that
/// ended meanwhile waited to drop its database, and a slow one ran into its own limits.
@Suite(.enabled(if: ProcessInfo.processInfo.environment["REVSYNC_ALONE_TESTS"] == "1", "set REVSYNC_ALONE_TESTS=1 (Scripts/test does, after the rest)"))
struct StalledPostgresTests {
    static func note(_ seq: Int64) -> ChangeSet {
        changeSet(seq: seq, ("notes", EntityChanges(create: [-seq], attributes: [-seq: ["body": "stalled", "pinned": false]])))
    }

    /// A stopped backend, continued exactly once: when the test asks, or at the latest when
    /// `limit` has passed (without the watch, the request would wait for that).
    final class StoppedBackend: Sendable {
        let pid: pid_t
        private let continued = Atomic(false)

        init(_ pid: pid_t) throws {
            self.pid = pid
            guard kill(pid, SIGSTOP) == 0 else { throw TestSetupError("could not stop PostgreSQL backend \(pid): errno \(errno)") }
        }

        /// Returns whether it was still stopped.
        @discardableResult func resume() -> Bool {
            guard !continued.exchange(true, ordering: .acquiringAndReleasing) else { return false }
            kill(pid, SIGCONT)
            return true
        }
    }

    @Test func aRequestWhosePostgreSQLStoppedAnsweringIsAnswered503AndItsRetryLosesNothing() async throws {
        try await withTestServer { harness in
            let phone = try await harness.register("member", name: "phone")
            var url = try #require(URLComponents(string: harness.server.settings.databaseURL))
            let name = "stalled-\(UUID().uuidString.prefix(8))"
            url.queryItems = (url.queryItems ?? []) + [URLQueryItem(name: "application_name", value: name)]
            let through = try #require(url.string)
            let gate = Gate()
            // Two seconds: the answer limit is six.
            try await harness.withSecondInstance(configure: {
                $0.databaseURL = through
                $0.databaseTimeout = .seconds(2)
            }, applyDelay: { await gate.wait() }) { other in
                async let answer = other.post(phone, SyncRequest(maxRevision: 0, changeSets: [Self.note(1)]))
                try await gate.waitUntilHeld()
                // The batch is held between its stamp and COMMIT; its backend waits for the COMMIT.
                let stopped: StoppedBackend
                do {
                    stopped = try StoppedBackend(try await Self.backend(harness, name: name))
                } catch {
                    // Let the held request go on: `answer` is awaited on the way out.
                    await gate.open()
                    throw error
                }
                let pid = stopped.pid
                await gate.open()
                let resumer = Task {
                    try? await Task.sleep(for: .seconds(20))
                    stopped.resume()
                }
                let (status, body) = try await answer
                let answeredWhileStopped = stopped.resume()
                resumer.cancel()
                #expect(answeredWhileStopped, "the request was answered only once PostgreSQL answered again (\(status))")
                #expect(status == .serviceUnavailable)
                #expect(String(buffer: body).contains("did not answer within 6"), "\(String(buffer: body))")
                #expect(other.server.metrics.exposition().contains("revsync_postgres_unanswered_total 1"))

                // The backend may have read the COMMIT before it stopped: the device's retry of
                // the same seq gets its outcome either way, and the note is stored once.
                var retried = false
                let resumedAt = ContinuousClock.now
                while !retried, ContinuousClock.now - resumedAt < .seconds(20) {
                    let (status, _) = try await other.post(phone, SyncRequest(maxRevision: 0, changeSets: [Self.note(1)]))
                    retried = status == .ok
                    if !retried { try await Task.sleep(for: .milliseconds(200)) }
                }
                #expect(retried, "the retry of seq 1 never went through after PostgreSQL was resumed")
                let stored = try await harness.rows("SELECT count(*) FROM notes WHERE body = 'stalled'").first?.decode(Int.self)
                #expect(stored == 1)
                try await eventually("PostgreSQL ended the backend whose connection was closed", within: .seconds(10)) {
                    try await harness.rows("SELECT 1 FROM pg_stat_activity WHERE pid = \(Int32(pid))").isEmpty
                }
            }
        }
    }

    /// The pid of the one backend named `name`, once it waits in a transaction.
    static func backend(_ harness: TestHarness, name: String) async throws -> pid_t {
        let started = ContinuousClock.now
        while true {
            let pids = try await harness.rows(
                "SELECT pid FROM pg_stat_activity WHERE application_name = \(name) AND state LIKE 'idle in transaction%'"
            ).map { try $0.decode(Int32.self) }
            if pids.count == 1, let pid = pids.first { return pid }
            guard ContinuousClock.now - started < .seconds(5) else {
                throw TestSetupError("expected one backend of \(name) waiting in a transaction, found \(pids)")
            }
            try await Task.sleep(for: .milliseconds(20))
        }
    }
}
