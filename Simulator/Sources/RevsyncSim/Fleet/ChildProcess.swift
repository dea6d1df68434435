import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Starting long-running programs (the servers) with their output appended to a log file,
/// signalling them, and waiting for them to exit without blocking a thread.
///
/// Foundation's `Process` sees a child exit when a socket the child inherited closes;
/// that is right for the servers, which start no processes of their own. Commands that
/// may leave a daemon behind go through ``CommandRunner``.
enum ChildProcess {
    /// Starts `executable` with exactly `environment`, stdin from /dev/null, and stdout and
    /// stderr appended to `logPath` (created if missing).
    static func launch(executable: String, arguments: [String], environment: [String: String], logPath: String) throws -> Process {
        let descriptor = open(logPath, O_WRONLY | O_CREAT | O_APPEND, 0o644)
        guard descriptor >= 0 else { throw FleetError("cannot open the log file \(logPath): errno \(errno)") }
        let log = FileHandle(fileDescriptor: descriptor, closeOnDealloc: true)
        // The child has its own copy of the descriptor once it runs.
        defer { try? log.close() }

        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.environment = environment
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = log
        process.standardError = log
        do {
            try process.run()
        } catch {
            throw FleetError("cannot run \(executable) \(arguments.joined(separator: " ")): \(error)")
        }
        return process
    }

    /// Waits until the process has exited and Foundation has reaped it; false if it still
    /// runs after `timeout`.
    static func waitForExit(_ process: Process, within timeout: Duration) async -> Bool {
        let deadline = ContinuousClock.now + timeout
        while process.isRunning {
            guard ContinuousClock.now < deadline else { return false }
            try? await Task.sleep(for: .milliseconds(10))
        }
        return true
    }

    static func send(_ signal: Int32, to process: Process) {
        guard process.isRunning else { return }
        _ = kill(process.processIdentifier, signal)
    }

    /// The current environment without `REVSYNC_*` variables, so a setting of the
    /// caller's shell cannot leak into a server the simulator configures itself.
    static func inheritedEnvironment() -> [String: String] {
        ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("REVSYNC_") }
    }
}
