import AsyncHTTPClient
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A release `revsync serve` run as a child process, so that its memory and CPU are its own
/// in /proc/PID and no bench code shares its address space.
///
/// The process outlives this value: call ``stop()`` when done (the push bench does, whatever happens).
final class ServerProcess {
    let port: Int
    let logPath: String
    private let process: Process

    var pid: Int32 { process.processIdentifier }
    var baseURL: String { "http://127.0.0.1:\(port)" }

    /// Starts `executable serve` with `environment` over the caller's environment without its
    /// `REVSYNC_*` variables (a setting of the caller's shell must not leak into the measured server).
    init(executable: String, port: Int, environment: [String: String], logPath: String) throws {
        guard FileManager.default.isExecutableFile(atPath: executable) else {
            throw BenchError("the server executable \(executable) does not exist: build it with `swift build -c release --product revsync`, or name it with --server")
        }
        let descriptor = open(logPath, O_WRONLY | O_CREAT | O_APPEND, 0o644)
        guard descriptor >= 0 else { throw BenchError("cannot open the server log \(logPath): errno \(errno)") }
        let log = FileHandle(fileDescriptor: descriptor, closeOnDealloc: true)
        // The child has its own copy of the descriptor once it runs.
        defer { try? log.close() }

        var merged = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("REVSYNC_") }
        merged.merge(environment) { $1 }
        merged["REVSYNC_LISTEN"] = "127.0.0.1:\(port)"
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = ["serve"]
        process.environment = merged
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = log
        process.standardError = log
        try process.run()
        self.process = process
        self.port = port
        self.logPath = logPath
    }

    /// Polls `GET /ready` until it answers 200 (the server has migrated and reaches PostgreSQL).
    func waitUntilReady(http: HTTPClient, timeout: Duration = .seconds(120)) async throws {
        let deadline = ContinuousClock.now + timeout
        while true {
            guard process.isRunning else {
                throw BenchError("the server on port \(port) exited with status \(process.terminationStatus) before it was ready; its log:\n\(logTail())")
            }
            if let response = try? await http.execute(HTTPClientRequest(url: baseURL + "/ready"), timeout: .seconds(2)), response.status == .ok {
                return
            }
            guard ContinuousClock.now < deadline else {
                throw BenchError("the server on port \(port) was not ready within \(timeout); its log:\n\(logTail())")
            }
            try await Task.sleep(for: .milliseconds(100))
        }
    }

    /// Throws, with the log's end, if the process has gone.
    func checkRunning() throws {
        guard process.isRunning else {
            throw BenchError("the server on port \(port) exited with status \(process.terminationStatus); its log:\n\(logTail())")
        }
    }

    /// SIGTERM, then SIGKILL if it still runs after `grace`.
    func stop(grace: Duration = .seconds(10)) async {
        guard process.isRunning else { return }
        kill(process.processIdentifier, SIGTERM)
        let deadline = ContinuousClock.now + grace
        while process.isRunning, ContinuousClock.now < deadline { try? await Task.sleep(for: .milliseconds(20)) }
        guard process.isRunning else { return }
        kill(process.processIdentifier, SIGKILL)
        while process.isRunning { try? await Task.sleep(for: .milliseconds(20)) }
    }

    /// The last lines of the server's log.
    func logTail(lines: Int = 30) -> String {
        guard let text = try? String(contentsOfFile: logPath, encoding: .utf8) else { return "(no log at \(logPath))" }
        return text.split(separator: "\n", omittingEmptySubsequences: false).suffix(lines).joined(separator: "\n")
    }
}
