import Foundation

/// wrk (Debian's `wrk`) as a child process: one run, its figures, and a thrown error for any run
/// that saw a failed request, which would make its requests/s a figure of something else.
struct Wrk: Sendable {
    let executable: URL

    /// wrk on the PATH, or an error that says how to install it.
    static func locate() throws -> Wrk {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        for directory in path.split(separator: ":") {
            let candidate = URL(fileURLWithPath: String(directory)).appendingPathComponent("wrk")
            if FileManager.default.isExecutableFile(atPath: candidate.path) { return Wrk(executable: candidate) }
        }
        throw BenchError("wrk is not on the PATH: apt-get install wrk (Scripts/bench does), or pass --load-seconds 0 to skip part (d)")
    }

    /// Lua that prints wrk's own summary as one line to parse: exact microseconds and error counts,
    /// where the human-readable output rounds and changes units. A script that keeps its threads in
    /// a global `threads` and counts, in each, answers it could not read in `unread` has them added.
    static let summary = """
        done = function(summary, latency, requests)
          local e = summary.errors
          local unread = 0
          for _, thread in ipairs(threads or {}) do unread = unread + (thread:get("unread") or 0) end
          io.write(string.format("revsync-bench: requests=%.0f duration_us=%.0f p50_us=%.0f p90_us=%.0f p99_us=%.0f max_us=%.0f " ..
            "connect=%.0f read=%.0f write=%.0f status=%.0f timeout=%.0f unread=%.0f\\n",
            summary.requests, summary.duration, latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max,
            e.connect, e.read, e.write, e.status, e.timeout, unread))
        end

        """

    func run(url: String, script: String, threads: Int, connections: Int, seconds: Int) async throws -> WrkRun {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("revsync-bench-wrk-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let scriptFile = directory.appendingPathComponent("load.lua"), outputFile = directory.appendingPathComponent("output.txt")
        try Data(script.utf8).write(to: scriptFile)
        guard FileManager.default.createFile(atPath: outputFile.path, contents: nil) else { throw BenchError("cannot create \(outputFile.path)") }
        let output = try FileHandle(forWritingTo: outputFile)
        defer { try? output.close() }

        let process = Process()
        process.executableURL = executable
        // A slow answer is a figure, not an error: wrk's default 2 s timeout would fail the run, so
        // only an answer past the server's own 10 s database timeout, a hang, counts as one.
        process.arguments = [
            "-t\(threads)", "-c\(connections)", "-d\(seconds)s", "--timeout", "30s", "--latency", "-s", scriptFile.path, url,
        ]
        // To a file, awaited through the termination handler: reading a pipe until wrk ends would block
        // a thread of the cooperative pool, which the in-process servers run on, for the whole run.
        process.standardOutput = output
        process.standardError = output
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            process.terminationHandler = { _ in continuation.resume() }
            do {
                try process.run()
            } catch {
                process.terminationHandler = nil
                continuation.resume(throwing: error)
            }
        }
        let text = (try? String(contentsOf: outputFile, encoding: .utf8)) ?? ""
        let command = "wrk " + (process.arguments ?? []).joined(separator: " ")
        guard process.terminationStatus == 0 else { throw BenchError("\(command) exited with \(process.terminationStatus):\n\(text)") }
        return try Self.parse(text, command: command)
    }

    /// The summary line, checked: an error of any kind (connect, read, write, timeout, 4xx/5xx) invalidates the run.
    static func parse(_ text: String, command: String) throws -> WrkRun {
        guard let line = text.split(separator: "\n").first(where: { $0.hasPrefix("revsync-bench: ") }) else {
            throw BenchError("\(command) printed no summary:\n\(text)")
        }
        var figures: [String: Double] = [:]
        for field in line.dropFirst("revsync-bench: ".count).split(separator: " ") {
            let parts = field.split(separator: "=", maxSplits: 1)
            if parts.count == 2, let value = Double(parts[1]) { figures[String(parts[0])] = value }
        }
        let errors = ["connect", "read", "write", "status", "timeout"]
        guard errors.allSatisfy({ figures[$0] == 0 }), !text.contains("Non-2xx"), !text.contains("Socket errors") else {
            throw BenchError("\(command) saw failed requests, the run is invalid:\n\(text)")
        }
        guard figures["unread"] ?? 0 == 0 else {
            throw BenchError("\(command) could not read maxRevision in \(Int(figures["unread"] ?? 0)) answers, the run is invalid "
                + "(the script's pattern no longer matches the answer's tail):\n\(text)")
        }
        guard let requests = figures["requests"], requests > 0, let duration = figures["duration_us"], duration > 0 else {
            throw BenchError("\(command) completed no request:\n\(text)")
        }
        var latency = Latencies()
        latency.p50 = figures["p50_us"] ?? 0
        latency.p90 = figures["p90_us"] ?? 0
        latency.p99 = figures["p99_us"] ?? 0
        latency.max = figures["max_us"] ?? 0
        latency.count = Int(requests)
        return WrkRun(requests: Int(requests), seconds: duration / 1_000_000, latency: latency)
    }
}
