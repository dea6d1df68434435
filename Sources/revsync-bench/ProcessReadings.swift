import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// What Linux's /proc says of one process: resident memory and CPU time.
enum ProcessReadings {
    /// `VmRSS` of /proc/PID/status, in bytes.
    static func residentBytes(_ pid: Int32) throws -> Int {
        let status = try String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)
        guard let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") }),
            let kilobytes = line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first.flatMap({ Int($0) })
        else { throw BenchError("no VmRSS in /proc/\(pid)/status: is the process still running?") }
        return kilobytes * 1024
    }

    /// User plus system CPU time of the whole process (all its threads), in clock ticks.
    static func cpuTicks(_ pid: Int32) throws -> Int {
        let stat = try String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8)
        // The command name (field 2) is in parentheses and may hold spaces: count fields after its last ")".
        guard let close = stat.lastIndex(of: ")") else { throw BenchError("cannot read /proc/\(pid)/stat") }
        let fields = stat[stat.index(after: close)...].split(separator: " ", omittingEmptySubsequences: true)
        // fields[0] is field 3 (state); utime and stime are fields 14 and 15.
        guard fields.count > 12, let user = Int(fields[11]), let system = Int(fields[12]) else {
            throw BenchError("cannot read utime and stime from /proc/\(pid)/stat")
        }
        return user + system
    }

    static var ticksPerSecond: Int { max(1, sysconf(Int32(_SC_CLK_TCK))) }

    /// The process's CPU use over `duration`, as a percentage of one core.
    static func cpuPercent(_ pid: Int32, over duration: Duration) async throws -> Double {
        let clock = ContinuousClock()
        let (ticks, began) = (try cpuTicks(pid), clock.now)
        try await Task.sleep(for: duration)
        let used = Double(try cpuTicks(pid) - ticks) / Double(ticksPerSecond)
        return 100 * used / (clock.now - began).inSeconds
    }

    /// Waits until the process has used at most one clock tick over `window` (its work done), or `timeout`.
    /// - Returns: whether it went quiet.
    static func waitUntilQuiet(_ pid: Int32, window: Duration = .milliseconds(500), timeout: Duration) async throws -> Bool {
        let deadline = ContinuousClock.now + timeout
        var ticks = try cpuTicks(pid)
        while ContinuousClock.now < deadline {
            try await Task.sleep(for: window)
            let now = try cpuTicks(pid)
            if now - ticks <= 1 { return true }
            ticks = now
        }
        return false
    }
}

/// The sockets one process may hold, checked before opening thousands of them.
enum SocketLimits {
    /// Makes sure this process (and the servers it starts, which inherit the limit) may open
    /// `needed` files, raising the soft limit up to the hard one if that is enough.
    /// - Returns: the soft limit now in force.
    static func ensureOpenFiles(_ needed: Int) throws -> Int {
        var limit = rlimit()
        guard getrlimit(resource, &limit) == 0 else { throw BenchError("getrlimit(RLIMIT_NOFILE) failed: errno \(errno)") }
        if Int(limit.rlim_cur) < needed, Int(limit.rlim_max) >= needed {
            var raised = limit
            raised.rlim_cur = limit.rlim_max
            if setrlimit(resource, &raised) == 0 { limit = raised }
        }
        guard Int(limit.rlim_cur) >= needed else {
            throw BenchError("""
                the open-file limit is \(limit.rlim_cur) (hard \(limit.rlim_max)), and the push bench needs \(needed) \
                (a socket per waiting device, in the bench and in the server): run it through Scripts/bench, which raises it, \
                or raise it yourself (`ulimit -n 65536`, as root or after raising the hard limit), or pass a smaller --push-waiters
                """)
        }
        return Int(limit.rlim_cur)
    }

    /// Local ports the kernel hands out for outgoing connections (net.ipv4.ip_local_port_range).
    static func ephemeralPorts() -> Int? {
        guard let text = try? String(contentsOfFile: "/proc/sys/net/ipv4/ip_local_port_range", encoding: .utf8) else { return nil }
        let bounds = text.split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == "\n" }).compactMap { Int($0) }
        guard bounds.count == 2 else { return nil }
        return bounds[1] - bounds[0] + 1
    }

    #if canImport(Glibc)
    private static let resource = __rlimit_resource_t(RLIMIT_NOFILE.rawValue)
    #else
    private static let resource = RLIMIT_NOFILE
    #endif
}
