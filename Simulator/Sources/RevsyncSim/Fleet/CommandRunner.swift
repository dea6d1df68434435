import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Runs a command to completion (`revsync migrate`, `Scripts/stack restart …`) with
/// `posix_spawn` and `waitpid`.
///
/// Not Foundation's `Process`: on Linux it decides that a child has exited when a socket the
/// child inherited closes, and a command that leaves a daemon behind (`redis-server
/// --daemonize yes`, `pg_ctl restart`) hands that socket on, so it would never end. The
/// command gets no descriptor of ours but stdin (/dev/null) and stdout/stderr (the log).
enum CommandRunner {
    /// Runs `command` (the program is looked up in PATH) with exactly `environment`, its output
    /// appended to `logPath`; its exit status, or 128 + the signal that ended it.
    static func run(_ command: [String], environment: [String: String], logPath: String, timeout: Duration) async throws -> Int32 {
        let pid = try spawn(command, environment: environment, logPath: logPath)
        let deadline = ContinuousClock.now + timeout
        while true {
            if let status = try reap(pid, command: command) { return status }
            if ContinuousClock.now >= deadline || Task.isCancelled {
                kill(pid, SIGKILL)
                while try reap(pid, command: command) == nil { try? await Task.sleep(for: .milliseconds(10)) }
                try Task.checkCancellation()
                throw FleetError(
                    "`\(command.joined(separator: " "))` did not finish within \(timeout); killed it. Log \(logPath):\n"
                        + LogTail.lastLines(of: logPath))
            }
            try? await Task.sleep(for: .milliseconds(20))
        }
    }

    /// The exit status once the child has exited (and is reaped), nil while it runs.
    private static func reap(_ pid: pid_t, command: [String]) throws -> Int32? {
        var status: Int32 = 0
        let result = waitpid(pid, &status, WNOHANG)
        if result == 0 { return nil }
        if result < 0 {
            if errno == EINTR { return nil }
            throw FleetError("waiting for `\(command.joined(separator: " "))` (pid \(pid)) failed: errno \(errno)")
        }
        // WIFEXITED / WEXITSTATUS / WTERMSIG, which Swift does not import.
        let signal = status & 0x7f
        return signal == 0 ? (status >> 8) & 0xff : 128 + signal
    }

    private static func spawn(_ command: [String], environment: [String: String], logPath: String) throws -> pid_t {
        guard let program = command.first else { throw FleetError("an empty command") }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, logPath, O_WRONLY | O_CREAT | O_APPEND, 0o644)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        closeInheritedDescriptors(&actions)

        let arguments = command.map { strdup($0) } + [nil]
        let variables = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            arguments.forEach { free($0) }
            variables.forEach { free($0) }
        }
        var pid: pid_t = 0
        let result = posix_spawnp(&pid, program, &actions, nil, arguments, variables)
        guard result == 0 else {
            throw FleetError("cannot run `\(command.joined(separator: " "))`: \(String(cString: strerror(result)))")
        }
        return pid
    }

    /// Closes every descriptor from 3 up in the child (glibc 2.34+; looked up at run time
    /// because Swift's Glibc module does not import it). Without it, a daemon the command
    /// starts would keep our sockets open, e.g. a Redis connection to itself.
    private static func closeInheritedDescriptors(_ actions: inout posix_spawn_file_actions_t) {
        #if canImport(Glibc)
        typealias CloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32
        guard let symbol = dlsym(dlopen(nil, RTLD_NOW), "posix_spawn_file_actions_addclosefrom_np") else { return }
        _ = unsafeBitCast(symbol, to: CloseFrom.self)(&actions, 3)
        #endif
    }
}
