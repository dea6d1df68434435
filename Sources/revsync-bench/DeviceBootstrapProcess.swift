import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// The parent's side of `revsync-bench bootstrap-device`: runs this executable again as a child
/// process, so that the bootstrap's peak resident size is its own, and reads its result line.
enum DeviceBootstrapProcess {
    /// This executable, to run again as the child.
    static var executable: String {
        (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? Bundle.main.executablePath ?? CommandLine.arguments[0]
    }

    /// Runs one bootstrap into the new file `path`, its stderr appended to `logPath`; kills the
    /// child if it runs past `timeout` (or if the caller is cancelled).
    static func run(
        url: String, token: String, mode: DeviceBootstrap.Mode, path: String, logPath: String, timeout: Duration
    ) async throws -> DeviceBootstrap.Result {
        let outputPath = logPath + ".out"
        let output = try openForWriting(outputPath, append: false)
        let log = try openForWriting(logPath, append: true)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = ["bootstrap-device", "--url", url, "--token", token, "--mode", mode.rawValue, "--path", path]
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = output
        process.standardError = log
        do {
            // The child has its own copies of the descriptors once it runs.
            defer {
                try? output.close()
                try? log.close()
            }
            try process.run()
        }

        let deadline = ContinuousClock.now + timeout
        while process.isRunning {
            do {
                guard ContinuousClock.now < deadline else { throw BenchError("the \(mode.rawValue) bootstrap did not finish within \(timeout)") }
                try await Task.sleep(for: .milliseconds(10))
            } catch {
                kill(process.processIdentifier, SIGKILL)
                while process.isRunning { try? await Task.sleep(for: .milliseconds(10)) }
                throw error
            }
        }
        let text = (try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? ""
        guard process.terminationReason == .exit, process.terminationStatus == 0,
            let line = text.split(separator: "\n").last(where: { $0.hasPrefix("{") })
        else {
            throw BenchError("""
                the \(mode.rawValue) bootstrap (\(executable) bootstrap-device) ended with status \(process.terminationStatus); \
                its output:\n\(text.suffix(2_000))\nits log (\(logPath)):\n\(tail(of: logPath))
                """)
        }
        return try JSONDecoder().decode(DeviceBootstrap.Result.self, from: Data(line.utf8))
    }

    private static func openForWriting(_ path: String, append: Bool) throws -> FileHandle {
        let descriptor = open(path, O_WRONLY | O_CREAT | (append ? O_APPEND : O_TRUNC), 0o644)
        guard descriptor >= 0 else { throw BenchError("cannot open \(path): errno \(errno)") }
        return FileHandle(fileDescriptor: descriptor, closeOnDealloc: true)
    }

    private static func tail(of path: String) -> String {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { return "(none)" }
        return text.split(separator: "\n", omittingEmptySubsequences: false).suffix(30).joined(separator: "\n")
    }
}
