import AsyncHTTPClient
import Foundation

/// The server's count of `POST /sync` requests held waiting, read from `GET /metrics`: the only
/// way to know that requests without an answer have reached the server and wait there.
struct WaitingGauge: Sendable {
    static let name = "revsync_sync_waiting"

    let http: HTTPClient

    /// The gauge's value (summed over its labels), or nil when the server does not expose it.
    func read(_ server: ServerProcess) async throws -> Int? {
        let response = try await http.execute(HTTPClientRequest(url: server.baseURL + "/metrics"), timeout: .seconds(10))
        let body = try await response.body.collect(upTo: 64 << 20)
        guard response.status == .ok else { throw BenchError("GET /metrics answered \(response.status)") }
        return Self.value(in: String(buffer: body))
    }

    /// The sum of the gauge's samples in a Prometheus text exposition, or nil if it has none.
    static func value(in exposition: String) -> Int? {
        var total: Double?
        for line in exposition.split(separator: "\n") where line.hasPrefix(name) {
            let rest = line.dropFirst(name.count)
            guard let first = rest.first, first == " " || first == "{" else { continue }
            // `name{labels} value [timestamp]`; a label value may hold spaces, so look past the last `}`.
            let afterLabels = first == "{" ? rest[(rest.lastIndex(of: "}").map { rest.index(after: $0) } ?? rest.endIndex)...] : rest
            guard let token = afterLabels.split(separator: " ").first, let value = Double(token) else { continue }
            total = (total ?? 0) + value
        }
        return total.map { Int($0.rounded()) }
    }

    /// What the gauge said once the bench stopped waiting for it.
    enum Armed {
        case reached
        /// The gauge stayed below the count for `stall` while no request was answered. The
        /// server's count can lag behind (it records a count read after its lock is released,
        /// so two waits arriving at once may leave the lower figure last); the waits themselves
        /// are checked by their answers.
        case short(Int)
        /// The server exposed no such gauge for `stall`.
        case absent
    }

    /// Waits until the server reports at least `count` waiting requests, while none of `requests`
    /// is answered (which throws), or until the gauge has not moved for `stall`.
    func waitFor(
        _ count: Int, on server: ServerProcess, requests: AnswerTally, timeout: Duration, stall: Duration,
        pollEvery interval: Duration = .milliseconds(2)
    ) async throws -> Armed {
        let deadline = ContinuousClock.now + timeout
        var last = -1, lastChange = ContinuousClock.now
        while true {
            try requests.checkNoneAnswered()
            // A gauge appears once first recorded: a server where nothing has waited yet may not show it.
            guard let waiting = try await read(server) else {
                if ContinuousClock.now - lastChange >= stall { return .absent }
                try await Task.sleep(for: interval)
                continue
            }
            if waiting >= count { return .reached }
            if waiting != last { (last, lastChange) = (waiting, .now) }
            if ContinuousClock.now - lastChange >= stall { return .short(waiting) }
            guard ContinuousClock.now < deadline else {
                throw BenchError("\(Self.name) on port \(server.port) was \(waiting) after \(timeout), not \(count); none of the \(count) requests was answered")
            }
            try await Task.sleep(for: interval)
        }
    }
}
