import Foundation

/// One commit seen by many waiting devices (part 2 of `--push`).
struct FanOutFigures: Codable {
    let waiters: Int
    let rounds: [FanOutRound]
    /// From the writer's acknowledgement to each waiter's answer, over every fan-out (an answer
    /// that arrived before the acknowledgement counts as 0).
    let fromAcknowledgement: Latencies
    /// Answers that arrived before the writer's acknowledgement, over every fan-out.
    let beforeAcknowledgement: Int

    init(waiters: Int, rounds: [FanOutRound], fromAcknowledgement all: [Duration]) {
        self.waiters = waiters
        self.rounds = rounds
        fromAcknowledgement = Latencies(all.map { max($0, .zero) })
        beforeAcknowledgement = all.count { $0 < .zero }
    }

    /// A figure of each fan-out, in order: `a / b / c`.
    func each(_ value: (FanOutRound) -> Double, _ format: (Double) -> String) -> String {
        rounds.map { format(value($0)) }.joined(separator: " / ")
    }
}

/// One commit with every waiter waiting.
struct FanOutRound: Codable {
    /// The writer's request, sent to acknowledged.
    let commitMicroseconds: Double
    /// From the writer's acknowledgement to each waiter's answer; its max is the last one answered.
    let fromAcknowledgement: Latencies
    /// From the writer's request being sent to each waiter's answer.
    let fromSend: Latencies
    /// CPU time (user + system, all threads) the server and the bench used from the writer's
    /// request to the last answer (seen within 2 ms): whose work the fan-out's time is.
    let serverCPUMilliseconds: Double
    let benchCPUMilliseconds: Double

    init(commit: Duration, fromAcknowledgement: [Duration], fromSend: [Duration], serverCPUMilliseconds: Double, benchCPUMilliseconds: Double) {
        commitMicroseconds = Double(commit.microseconds)
        self.fromAcknowledgement = Latencies(fromAcknowledgement.map { max($0, .zero) })
        self.fromSend = Latencies(fromSend)
        self.serverCPUMilliseconds = serverCPUMilliseconds
        self.benchCPUMilliseconds = benchCPUMilliseconds
    }
}

/// Commits one at a time, each seen by every waiting device (parts 3 and 4 of `--push`).
struct VisibleFigures: Codable {
    let waiters: Int
    let commits: Int
    /// Commits before the measured ones, not counted.
    let warmUpCommits: Int
    /// From the writer's acknowledgement to each other device's answer.
    let latency: Latencies
    /// The writer's round trip for each commit.
    let commitLatency: Latencies
    let beforeAcknowledgement: Int
    /// Answers without the commit a waiter waited for (it then waits again): the server woke it
    /// for nothing, or answered before the commit reached it. Measured commits only.
    let answeredWithoutCommit: Int
    /// How the bench knew every waiter was waiting before each commit.
    let armedBy: String
}

/// One line of the push table: a figure, and its target with whether it was met.
struct PushFigure: Codable {
    let figure: String
    let value: String
    let target: String?
    let met: Bool?
}

/// `revsync-bench --push`: live push by long-poll (issue 12).
struct PushReport: Codable, ReportFile {
    let waiters: Int
    let registrationSeconds: Double
    let registrationConcurrency: Int
    let connectSeconds: Double
    /// From the first waiting request sent to the server holding them all.
    let armSeconds: Double
    /// How the bench knew that every request was waiting at the server.
    let armedBy: String
    let residentBytesBefore: Int
    /// Every device connected, none asking yet.
    let residentBytesConnected: Int
    let residentBytesWaiting: Int
    let residentBytesPerWaiter: Double
    let idleSeconds: Double
    /// The server's CPU (user + system) over `idleSeconds` with every device waiting, % of one core.
    let idleCPUPercent: Double
    /// The same before any device waited.
    let baselineCPUPercent: Double
    let fanOut: FanOutFigures
    let sameInstance: VisibleFigures
    let acrossInstances: VisibleFigures
    let figures: [PushFigure]

    static let targetBytesPerWaiter = 20.0 * 1024
    static let targetIdleCPUPercent = 1.0
    static let targetFanOutP99 = 200_000.0
    static let targetSameInstanceP50 = 5_000.0
    static let targetSameInstanceP99 = 20_000.0
    static let targetAcrossInstancesP50 = 10_000.0

    init(
        waiters: Int, registrationSeconds: Double, registrationConcurrency: Int, connectSeconds: Double, armSeconds: Double, armedBy: String,
        residentBytesBefore: Int, residentBytesConnected: Int, residentBytesWaiting: Int, idleSeconds: Double, idleCPUPercent: Double, baselineCPUPercent: Double,
        fanOut: FanOutFigures, sameInstance: VisibleFigures, acrossInstances: VisibleFigures
    ) {
        self.waiters = waiters
        self.registrationSeconds = registrationSeconds
        self.registrationConcurrency = registrationConcurrency
        self.connectSeconds = connectSeconds
        self.armSeconds = armSeconds
        self.armedBy = armedBy
        self.residentBytesBefore = residentBytesBefore
        self.residentBytesConnected = residentBytesConnected
        self.residentBytesWaiting = residentBytesWaiting
        self.residentBytesPerWaiter = Double(residentBytesWaiting - residentBytesBefore) / Double(max(waiters, 1))
        self.idleSeconds = idleSeconds
        self.idleCPUPercent = idleCPUPercent
        self.baselineCPUPercent = baselineCPUPercent
        self.fanOut = fanOut
        self.sameInstance = sameInstance
        self.acrossInstances = acrossInstances
        figures = Self.figures(
            waiters: waiters, registrationSeconds: registrationSeconds, registrationConcurrency: registrationConcurrency,
            connectSeconds: connectSeconds, armSeconds: armSeconds, armedBy: armedBy,
            before: residentBytesBefore, connected: residentBytesConnected, waiting: residentBytesWaiting, perWaiter: residentBytesPerWaiter,
            idleSeconds: idleSeconds, idleCPU: idleCPUPercent, baselineCPU: baselineCPUPercent,
            fanOut: fanOut, sameInstance: sameInstance, acrossInstances: acrossInstances)
    }

    private static func figures(
        waiters: Int, registrationSeconds: Double, registrationConcurrency: Int, connectSeconds: Double, armSeconds: Double, armedBy: String,
        before: Int, connected: Int, waiting: Int, perWaiter: Double, idleSeconds: Double, idleCPU: Double, baselineCPU: Double,
        fanOut: FanOutFigures, sameInstance: VisibleFigures, acrossInstances: VisibleFigures
    ) -> [PushFigure] {
        let f = Latencies.format
        func plain(_ figure: String, _ value: String) -> PushFigure { PushFigure(figure: figure, value: value, target: nil, met: nil) }
        func atMost(_ figure: String, _ value: Double, _ target: Double, _ label: String, _ format: (Double) -> String) -> PushFigure {
            PushFigure(figure: figure, value: format(value), target: "≤ \(label)", met: value <= target)
        }
        func without(_ figures: VisibleFigures) -> PushFigure {
            PushFigure(
                figure: "  answers without the commit (the waiter waits again)", value: "\(figures.answeredWithoutCommit)",
                target: "0", met: figures.answeredWithoutCommit == 0)
        }
        func early(_ count: Int, of total: Int) -> PushFigure { plain("  answered before the writer's ack (counted as 0)", "\(count) of \(total)") }
        let percent = { (value: Double) in String(format: "%.2f %%", value) }
        let count = Self.count
        var figures = [
            plain("registering \(count(waiters)) devices (\(registrationConcurrency) at a time)",
                  String(format: "%.1f s (%.0f/s)", registrationSeconds, Double(waiters) / max(registrationSeconds, 1e-9))),
            plain("connecting them / until all wait (\(armedBy))", String(format: "%.1f s / %.1f s", connectSeconds, armSeconds)),
            plain("server RSS, warm, none waiting", Self.mebibytes(before)),
            plain("server RSS, \(count(waiters)) waiting", Self.mebibytes(waiting)),
            atMost("  per waiter", perWaiter, targetBytesPerWaiter, "20 KiB", Self.kibibytes),
            plain("  of which the connection alone (all connected, none asking)",
                  "\(Self.kibibytes(Double(connected - before) / Double(max(waiters, 1)))) (\(Self.mebibytes(connected)))"),
            atMost("server CPU over \(String(format: "%.0f", idleSeconds)) s, \(count(waiters)) waiting idle (% of one core)", idleCPU, targetIdleCPUPercent, "1 %", percent),
            plain("  the same before any waited", percent(baselineCPU)),
            plain("one commit, \(count(waiters)) waiting, \(fanOut.rounds.count) times: the writer's round trip", fanOut.each(\.commitMicroseconds, Self.milliseconds) + " ms"),
            plain("  writer's ack → each answer (all \(fanOut.rounds.count)), p50", f(fanOut.fromAcknowledgement.p50)),
            atMost("  p99", fanOut.fromAcknowledgement.p99, targetFanOutP99, "200 ms", f),
            plain("  each one's p99", fanOut.each(\.fromAcknowledgement.p99, Self.milliseconds) + " ms"),
            plain("  each one's last answer", fanOut.each(\.fromAcknowledgement.max, Self.milliseconds) + " ms"),
            plain("  writer's request sent → last answered", fanOut.each(\.fromSend.max, Self.milliseconds) + " ms"),
            early(fanOut.beforeAcknowledgement, of: fanOut.fromAcknowledgement.count),
            plain("  CPU meanwhile: server", fanOut.each(\.serverCPUMilliseconds) { String(format: "%.0f", $0) } + " ms"),
            plain("  CPU meanwhile: bench", fanOut.each(\.benchCPUMilliseconds) { String(format: "%.0f", $0) } + " ms"),
        ]
        let same = sameInstance.latency, across = acrossInstances.latency
        figures += [
            atMost("write to visible, one instance (\(sameInstance.waiters) waiting, \(sameInstance.commits) commits), p50", same.p50, targetSameInstanceP50, "5 ms", f),
            plain("  p90", f(same.p90)),
            atMost("  p99", same.p99, targetSameInstanceP99, "20 ms", f),
            plain("  the writer's round trip, p50 / p99", "\(f(sameInstance.commitLatency.p50)) / \(f(sameInstance.commitLatency.p99))"),
            early(sameInstance.beforeAcknowledgement, of: sameInstance.latency.count),
            without(sameInstance),
            atMost("across two instances (writer on one, \(acrossInstances.waiters) waiting on the other), p50", across.p50, targetAcrossInstancesP50, "10 ms", f),
            plain("  p90", f(across.p90)),
            plain("  p99", f(across.p99)),
            plain("  the writer's round trip, p50 / p99", "\(f(acrossInstances.commitLatency.p50)) / \(f(acrossInstances.commitLatency.p99))"),
            early(acrossInstances.beforeAcknowledgement, of: acrossInstances.latency.count),
            without(acrossInstances),
        ]
        return figures
    }

    func table() -> [String] {
        let width = max(60, figures.map(\.figure.count).max() ?? 0)
        var lines = [
            "Push by long-poll (release servers on loopback, one PostgreSQL and Redis; the bench's clients share the cores)",
            Self.cell("figure", width) + " | " + Self.cell("value", 18) + " | " + Self.cell("target", 10) + " | ",
        ]
        for figure in figures {
            let verdict = figure.met.map { $0 ? "met" : "MISSED" } ?? ""
            lines.append(
                [Self.cell(figure.figure, width), Self.cell(figure.value, 18), Self.cell(figure.target ?? "", 10), verdict]
                    .joined(separator: " | ").replacing(/\s+$/, with: ""))
        }
        lines.append(
            "Times from the writer's ack run from its answer received to each waiter's answer received, both taken on the bench's "
                + "event loops (the writer on its own); an answer that arrived before the ack counts as 0.")
        let armedBy = sameInstance.armedBy == acrossInstances.armedBy
            ? sameInstance.armedBy : "one instance: \(sameInstance.armedBy); two: \(acrossInstances.armedBy)"
        lines.append(
            "Waiters re-arm after each answer; each commit waits until all are waiting again (\(armedBy)); "
                + "\(sameInstance.warmUpCommits) warm-up commits per run are not counted.")
        return lines
    }

    private static func cell(_ text: String, _ width: Int) -> String { text + String(repeating: " ", count: max(0, width - text.count)) }
    private static func mebibytes(_ bytes: Int) -> String { String(format: "%.1f MiB", Double(bytes) / 1_048_576) }
    private static func kibibytes(_ bytes: Double) -> String { String(format: "%.1f KiB", bytes / 1024) }
    /// Microseconds as `123` (milliseconds, no unit), for a list of them.
    private static func milliseconds(_ microseconds: Double) -> String { String(format: "%.0f", microseconds / 1000) }
    /// `10,000` style.
    private static func count(_ value: Int) -> String {
        let digits = String(value)
        var out = ""
        for (index, digit) in digits.enumerated() {
            if index > 0, (digits.count - index) % 3 == 0 { out.append(",") }
            out.append(digit)
        }
        return out
    }
}
