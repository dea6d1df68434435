import AsyncHTTPClient
import Foundation
import Logging
import NIOCore
import NIOPosix
import RevsyncHarness
import RevsyncWire

/// `--push`: live push by long-poll (issue 12), against release `revsync serve` processes on a
/// fresh database, so that the server's memory and CPU can be read from /proc.
///
/// 1. `waiters` devices registered through the API, then all waiting on one instance: its
///    memory before and while they wait, and its CPU while they wait idle.
/// 2. One commit by a writer device with all of them waiting: each answer's time after the
///    writer's acknowledgement; `fanOuts` times, all of them waiting again before each.
/// 3. Write to visible: `visibleWaiters` devices waiting on the writer's instance, commits one at a time.
/// 4. The same with the waiters on a second instance (same PostgreSQL and Redis).
struct PushBench {
    struct Options {
        var waiters = 10_000
        var visibleWaiters = 100
        /// Part 2's commits, each with every waiter waiting: one fan-out on this machine varies
        /// by a fifth from run to run.
        var fanOuts = 5
        var commits = 200
        var warmUpCommits = 10
        var idleSeconds = 10
        var server = ""
    }

    let databaseURL: String
    let redisURL: String
    let options: Options
    let logger: Logger

    /// `POST /devices` at once while registering.
    static let registrationConcurrency = 64
    /// Connections being opened at once: within the server's listen backlog.
    static let connectConcurrency = 256
    /// Part 1's requests must outlast connecting, arming and the idle measurement.
    static let fanOutWait = 240
    static let visibleWait = 60
    /// The servers' `REVSYNC_MAX_WAIT_SECONDS`, above every wait the bench asks for.
    static let serverMaxWait = 300
    /// The servers' `REVSYNC_DB_TIMEOUT_SECONDS` (the default, made explicit): each request's
    /// deadline timer for a PostgreSQL connection fires at its deadline even when the query ended
    /// long before, so the idle CPU is read only once the last burst of requests is that far behind.
    static let databaseTimeoutSeconds = 10
    static var settle: Duration { .seconds(databaseTimeoutSeconds + 2) }
    /// Answers one waiter may get for one commit in parts 3 and 4 before the bench gives up.
    static let maxAnswersPerCommit = 4

    /// Starts from the server of `databaseURL`: a database `revsync_bench` is made afresh there.
    init(databaseURL: String, redisURL: String, options: Options, logger: Logger) async throws {
        self.databaseURL = try await Bench.freshDatabase(serverURL: databaseURL, redisURL: redisURL, logger: logger)
        self.redisURL = redisURL
        self.options = options
        self.logger = logger
    }

    func run() async throws -> BenchReport {
        // A socket per waiter in the bench, and one in the server (which inherits the limit), plus the rest.
        let limit = try SocketLimits.ensureOpenFiles(options.waiters + 1_000)
        if let ports = SocketLimits.ephemeralPorts(), ports < options.waiters + 500 {
            throw BenchError("net.ipv4.ip_local_port_range offers \(ports) local ports, too few for \(options.waiters) connections to one server")
        }
        let durability = try await SQL.durability(on: databaseURL, logger: logger)
        let logDirectory = FileManager.default.temporaryDirectory.appendingPathComponent("revsync-bench-push-\(getpid())").path
        try FileManager.default.createDirectory(atPath: logDirectory, withIntermediateDirectories: true)
        print("push: open-file limit \(limit); \(options.waiters) waiting devices; server \(options.server), its logs in \(logDirectory)")

        var configuration = HTTPClient.Configuration()
        configuration.decompression = .disabled
        configuration.connectionPool.concurrentHTTP1ConnectionsPerHostSoftLimit = Self.registrationConcurrency
        let http = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
        // The writer's own event loop: its acknowledgement is timed without queueing behind the
        // waiters' answers, which arrive at the same moment on the shared loops.
        let writerLoop = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let servers = ServerSet(executable: options.server, environment: serverEnvironment(), logDirectory: logDirectory)

        let result: Result<PushReport, any Error>
        do {
            result = .success(try await measure(servers: servers, http: http, writerLoop: writerLoop))
        } catch {
            result = .failure(error)
        }
        await servers.stopAll()
        try? await http.shutdown()
        try? await writerLoop.shutdownGracefully()
        let push = try result.get()
        return BenchReport(
            machine: Machine.describe(), date: ISO8601DateFormatter().string(from: Date()), revisions: 0, entryBytes: 0,
            durability: durability, catchUp: [], pagedCatchUp: nil, textBytes: nil, load: nil, writes: [], wrkWrites: [], floor: [], push: push)
    }

    private func serverEnvironment() -> [String: String] {
        let headroom = options.waiters + 2_000
        var environment = [
            "REVSYNC_DATABASE_URL": databaseURL,
            "REVSYNC_REDIS_URL": redisURL,
            "REVSYNC_ADMIN_TOKEN": Bench.adminToken,
            "REVSYNC_SCHEMA": ProcessInfo.processInfo.environment["REVSYNC_SCHEMA"]
                ?? URL(fileURLWithPath: FileManager.default.currentDirectoryPath).appendingPathComponent("Config/schema.json").path,
            // Every waiter holds a connection and a request in flight.
            "REVSYNC_MAX_CONNECTIONS": String(headroom),
            "REVSYNC_MAX_REQUESTS_IN_FLIGHT": String(headroom),
            // 10,000 tokens the server has not seen arrive at once; the default (2,000/s) would answer most 503.
            "REVSYNC_TOKEN_LOOKUPS_PER_SECOND": "1000000",
            "REVSYNC_MAX_WAIT_SECONDS": String(Self.serverMaxWait),
            "REVSYNC_HTTP_IDLE_TIMEOUT_SECONDS": String(Self.serverMaxWait),
            "REVSYNC_DB_TIMEOUT_SECONDS": String(Self.databaseTimeoutSeconds),
            // Registering 10,000 devices logs each at info.
            "REVSYNC_LOG_LEVEL": "warning",
        ]
        // Group commit and the request workers as the caller's environment sets them, as for the other parts.
        for name in ["REVSYNC_COMMIT_BATCH_SIZE", "REVSYNC_COMMIT_WAIT_MS", "REVSYNC_REQUEST_WORKERS"] {
            if let value = ProcessInfo.processInfo.environment[name] { environment[name] = value }
        }
        return environment
    }

    private func measure(servers: ServerSet, http: HTTPClient, writerLoop: MultiThreadedEventLoopGroup) async throws -> PushReport {
        let clock = ContinuousClock()
        let gauge = WaitingGauge(http: http)
        let first = try await servers.start(port: try FreePort.kernelChosenPort(), http: http)

        print("registering \(options.waiters) devices, \(Self.registrationConcurrency) at a time …")
        let client = BenchClient(http: http, port: first.port)
        let writerToken = try await client.register("push-writer", role: "member", adminToken: Bench.adminToken)
        let registrationBegan = clock.now
        let tokens = try await register(options.waiters, client: client)
        let registrationSeconds = (clock.now - registrationBegan).inSeconds

        var writer = try await PushWriter(connection: PollConnection.connect(port: first.port, token: writerToken, group: writerLoop))
        let visibleTokens = Array(tokens.prefix(options.visibleWaiters))

        // Warm-up: the whole push path a few times, so that what is paid once (pools, the waiting
        // machinery, a first subscription) is in the baseline rather than counted per waiter.
        print("warming up …")
        let warm = try await connectAll(visibleTokens, port: first.port)
        _ = try await rounds(warm, waitingOn: first, writer: &writer, commits: 3, warmUp: 0, gauge: gauge)
        await closeAll(warm)

        print("the server idle, none waiting: \(Self.settle) to settle, then \(options.idleSeconds) s …")
        try await Task.sleep(for: Self.settle)
        let baselineCPU = try await ProcessReadings.cpuPercent(first.pid, over: .seconds(options.idleSeconds))
        let residentBefore = try ProcessReadings.residentBytes(first.pid)

        // Part 1: every device waiting on one instance.
        print("connecting \(options.waiters) devices …")
        let connectBegan = clock.now
        let connections = try await connectAll(tokens, port: first.port)
        let connectSeconds = (clock.now - connectBegan).inSeconds
        // Connected but not yet asking: what a connection costs, apart from a waiting request.
        try await Task.sleep(for: .seconds(1))
        let residentConnected = try ProcessReadings.residentBytes(first.pid)
        print("\(options.waiters) devices waiting …")
        let armBegan = clock.now
        let from = writer.revision
        let futures = connections.map { $0.sync(Self.waitBody(from, wait: Self.fanOutWait)) }
        let early = AnswerTally(futures)
        let armedBy: String
        switch try await gauge.waitFor(options.waiters, on: first, requests: early, timeout: .seconds(120), stall: .seconds(5), pollEvery: .milliseconds(100)) {
        case .reached:
            armedBy = WaitingGauge.name
        case .short(let waiting):
            armedBy = "\(WaitingGauge.name) stopped at \(waiting), none answered"
        case .absent:
            // No gauge: the requests have been handled once the server has nothing left to do.
            guard try await ProcessReadings.waitUntilQuiet(first.pid, timeout: .seconds(120)) else {
                throw BenchError("the server was still busy 120 s after \(options.waiters) waiting requests were sent")
            }
            armedBy = "the server's CPU went quiet (no \(WaitingGauge.name) on /metrics)"
        }
        let armSeconds = (clock.now - armBegan).inSeconds
        try early.checkNoneAnswered()
        print("the server idle, \(options.waiters) waiting: \(Self.settle) to settle, then \(options.idleSeconds) s …")
        try await Task.sleep(for: Self.settle)
        let idleCPU = try await ProcessReadings.cpuPercent(first.pid, over: .seconds(options.idleSeconds))
        let residentWaiting = try ProcessReadings.residentBytes(first.pid)
        try early.checkNoneAnswered()
        try first.checkRunning()

        // Part 2: one commit with all of them waiting, `fanOuts` times.
        var fanOuts: [FanOutRound] = [], fromAcknowledgement: [Duration] = []
        var waiting = futures
        for round in 1...options.fanOuts {
            if round > 1 {
                let from = writer.revision
                waiting = connections.map { $0.sync(Self.waitBody(from, wait: Self.fanOutWait)) }
                let again = AnswerTally(waiting)
                switch try await gauge.waitFor(options.waiters, on: first, requests: again, timeout: .seconds(120), stall: .seconds(5)) {
                case .reached, .absent: break
                case .short(let count):
                    throw BenchError("only \(count) of the \(options.waiters) waiters waited again before fan-out \(round) (\(WaitingGauge.name))")
                }
                try again.checkNoneAnswered()
                // Both sides idle, so that each fan-out starts as the first did.
                _ = try await ProcessReadings.waitUntilQuiet(first.pid, timeout: .seconds(30))
                _ = try await ProcessReadings.waitUntilQuiet(getpid(), timeout: .seconds(30))
            }
            print("one commit, \(options.waiters) waiting (\(round) of \(options.fanOuts)) …")
            let (round, samples) = try await fanOut(waiting, server: first, writer: &writer)
            fanOuts.append(round)
            fromAcknowledgement += samples
        }
        let fanOut = FanOutFigures(waiters: options.waiters, rounds: fanOuts, fromAcknowledgement: fromAcknowledgement)
        await closeAll(connections)

        // Part 3: write to visible on one instance.
        print("write to visible, one instance: \(options.visibleWaiters) waiting, \(options.commits) commits …")
        let sameWaiters = try await connectAll(visibleTokens, port: first.port)
        let sameInstance = try await rounds(sameWaiters, waitingOn: first, writer: &writer, commits: options.commits, warmUp: options.warmUpCommits, gauge: gauge)
        await closeAll(sameWaiters)

        // Part 4: the waiters on a second instance.
        print("write to visible across two instances …")
        let second = try await servers.start(port: try FreePort.kernelChosenPort(), http: http)
        let otherWaiters = try await connectAll(visibleTokens, port: second.port)
        let acrossInstances = try await rounds(
            otherWaiters, waitingOn: second, writer: &writer, commits: options.commits, warmUp: options.warmUpCommits, gauge: gauge)
        await closeAll(otherWaiters)
        await writer.connection.close()

        return PushReport(
            waiters: options.waiters, registrationSeconds: registrationSeconds, registrationConcurrency: Self.registrationConcurrency,
            connectSeconds: connectSeconds, armSeconds: armSeconds, armedBy: armedBy,
            residentBytesBefore: residentBefore, residentBytesConnected: residentConnected, residentBytesWaiting: residentWaiting,
            idleSeconds: Double(options.idleSeconds), idleCPUPercent: idleCPU, baselineCPUPercent: baselineCPU,
            fanOut: fanOut, sameInstance: sameInstance, acrossInstances: acrossInstances)
    }

    /// One commit by the writer with every one of `waiting` waiting for it: its figures, and
    /// each answer's time after the writer's acknowledgement.
    private func fanOut(
        _ waiting: [EventLoopFuture<PollAnswer>], server: ServerProcess, writer: inout PushWriter
    ) async throws -> (round: FanOutRound, fromAcknowledgement: [Duration]) {
        let ticksBefore = (server: try ProcessReadings.cpuTicks(server.pid), bench: try ProcessReadings.cpuTicks(getpid()))
        let commit = try await writer.commit()
        var ticksAfter = (server: 0, bench: 0)
        let answers = try await AnswerTally.all(waiting, within: .seconds(60), what: "the \(waiting.count) waiters after revision \(commit.revision)") {
            ticksAfter = (try ProcessReadings.cpuTicks(server.pid), try ProcessReadings.cpuTicks(getpid()))
        }
        let milliseconds = { (ticks: Int) in Double(ticks) * 1000 / Double(ProcessReadings.ticksPerSecond) }
        let serverCPU = milliseconds(ticksAfter.server - ticksBefore.server)
        let benchCPU = milliseconds(ticksAfter.bench - ticksBefore.bench)
        try Self.check(answers, carry: commit.revision)
        try server.checkRunning()
        let fromAcknowledgement = answers.map { $0.received - commit.ack.received }
        let round = FanOutRound(
            commit: commit.ack.received - commit.sent, fromAcknowledgement: fromAcknowledgement,
            fromSend: answers.map { $0.received - commit.sent }, serverCPUMilliseconds: serverCPU, benchCPUMilliseconds: benchCPU)
        return (round, fromAcknowledgement)
    }

    /// `warmUp + commits` commits by the writer, each after every waiter waits for it on `server`;
    /// each waiter waits again from the new revision once answered.
    private func rounds(
        _ waiters: [PollConnection], waitingOn server: ServerProcess, writer: inout PushWriter, commits: Int, warmUp: Int, gauge: WaitingGauge
    ) async throws -> VisibleFigures {
        var latencies: [Duration] = [], commitLatencies: [Duration] = []
        var beforeAcknowledgement = 0, answeredWithout = 0, gaugeShort = 0
        var gaugeExposed = true
        for round in 0..<(warmUp + commits) {
            let from = writer.revision
            let futures = waiters.map { $0.sync(Self.waitBody(from, wait: Self.visibleWait)) }
            if gaugeExposed {
                switch try await gauge.waitFor(waiters.count, on: server, requests: AnswerTally(futures), timeout: .seconds(10), stall: .seconds(1)) {
                case .reached: break
                case .short: gaugeShort += 1
                case .absent: gaugeExposed = false
                }
            }
            if !gaugeExposed {
                // Nothing says when the server holds them: give it time enough on loopback.
                try await Task.sleep(for: .milliseconds(20))
            }
            let commit = try await writer.commit()
            var answers = try await AnswerTally.all(futures, within: .seconds(30), what: "\(waiters.count) waiters after revision \(commit.revision)")
            // A waiter answered without the commit does what a device would: it waits again from
            // the revision it was given, and its time runs to the answer that carries the commit.
            for attempt in 1...Self.maxAnswersPerCommit {
                var behind: [(index: Int, from: Int64)] = []
                for (index, answer) in answers.enumerated() {
                    if let from = try Self.behind(answer, revision: commit.revision, waiter: index) { behind.append((index, from)) }
                }
                if behind.isEmpty { break }
                guard attempt < Self.maxAnswersPerCommit else {
                    throw BenchError("\(behind.count) waiters were answered \(attempt) times without revision \(commit.revision), e.g. \(String(buffer: answers[behind[0].index].body).prefix(300))")
                }
                if round >= warmUp { answeredWithout += behind.count }
                let again = behind.map { waiters[$0.index].sync(Self.waitBody($0.from, wait: Self.visibleWait)) }
                for (waiter, answer) in zip(behind, try await AnswerTally.all(again, within: .seconds(30), what: "waiters waiting again for \(commit.revision)")) {
                    answers[waiter.index] = answer
                }
            }
            guard round >= warmUp else { continue }
            for answer in answers {
                let latency = answer.received - commit.ack.received
                if latency < .zero { beforeAcknowledgement += 1 }
                latencies.append(max(latency, .zero))
            }
            commitLatencies.append(commit.ack.received - commit.sent)
        }
        try server.checkRunning()
        return VisibleFigures(
            waiters: waiters.count, commits: commits, warmUpCommits: warmUp, latency: Latencies(latencies),
            commitLatency: Latencies(commitLatencies), beforeAcknowledgement: beforeAcknowledgement, answeredWithoutCommit: answeredWithout,
            armedBy: gaugeExposed
                ? WaitingGauge.name + (gaugeShort > 0 ? ", which stopped short before \(gaugeShort) commits (none answered early; 1 s later the commit went ahead)" : "")
                : "20 ms after sending (no \(WaitingGauge.name) on /metrics)")
    }

    static func waitBody(_ maxRevision: Int64, wait: Int) -> String {
        "{\"maxRevision\":\(maxRevision),\"changeSets\":[],\"wait\":\(wait)}"
    }

    /// Every answer is a 200 holding the committed revision.
    static func check(_ answers: [PollAnswer], carry revision: Int64) throws {
        for (index, answer) in answers.enumerated() {
            if let from = try behind(answer, revision: revision, waiter: index) {
                throw BenchError(
                    "waiter \(index) was answered without revision \(revision) (maxRevision \(from)): "
                        + "does the server hold waiting requests (issue 12)? \(String(buffer: answer.body).prefix(300))")
            }
        }
    }

    /// Nil when `answer` holds `revision`; the answer's `maxRevision` when it is a 200 that
    /// stops short of it. Anything else throws.
    static func behind(_ answer: PollAnswer, revision: Int64, waiter: Int) throws -> Int64? {
        guard answer.status == .ok else { throw BenchError("waiter \(waiter) was answered \(answer.status.code): \(String(buffer: answer.body).prefix(300))") }
        let response = try JSONDecoder().decode(SyncResponse.self, from: Data(answer.body.readableBytesView))
        if response.changeSets.contains(where: { $0.revision == revision }) { return nil }
        guard response.maxRevision < revision else {
            throw BenchError("waiter \(waiter) was answered past revision \(revision) without it: \(String(buffer: answer.body).prefix(300))")
        }
        return response.maxRevision
    }

    /// Registers `count` viewer devices, `registrationConcurrency` requests at a time; their tokens in order.
    private func register(_ count: Int, client: BenchClient) async throws -> [String] {
        let lanes = Self.registrationConcurrency
        return try await withThrowingTaskGroup(of: [(Int, String)].self) { group in
            for lane in 0..<lanes {
                group.addTask {
                    var registered: [(Int, String)] = []
                    for index in stride(from: lane, to: count, by: lanes) {
                        registered.append((index, try await client.register("push-\(index)", role: "viewer", adminToken: Bench.adminToken)))
                    }
                    return registered
                }
            }
            var tokens = Array(repeating: "", count: count)
            for try await registered in group {
                for (index, token) in registered { tokens[index] = token }
            }
            return tokens
        }
    }

    /// A connection per token, `connectConcurrency` being opened at a time.
    private func connectAll(_ tokens: [String], port: Int) async throws -> [PollConnection] {
        let group = MultiThreadedEventLoopGroup.singleton
        return try await withThrowingTaskGroup(of: (Int, PollConnection).self) { tasks in
            var connections = [PollConnection?](repeating: nil, count: tokens.count)
            var next = 0
            while next < min(tokens.count, Self.connectConcurrency) {
                let index = next
                tasks.addTask { (index, try await PollConnection.connect(port: port, token: tokens[index], group: group)) }
                next += 1
            }
            while let (index, connection) = try await tasks.next() {
                connections[index] = connection
                if next < tokens.count {
                    let index = next
                    tasks.addTask { (index, try await PollConnection.connect(port: port, token: tokens[index], group: group)) }
                    next += 1
                }
            }
            return connections.compactMap { $0 }
        }
    }

    private func closeAll(_ connections: [PollConnection]) async {
        for connection in connections { connection.channel.close(promise: nil) }
        for connection in connections { try? await connection.channel.closeFuture.get() }
    }
}

/// The one device that commits: a note per change set, one at a time, on its own connection.
struct PushWriter {
    struct Commit {
        let sent: ContinuousClock.Instant
        let ack: PollAnswer
        let revision: Int64
    }

    let connection: PollConnection
    private(set) var seq: Int64 = 0
    /// The head as the writer last saw it.
    private(set) var revision: Int64

    init(connection: PollConnection) async throws {
        self.connection = connection
        let answer = try await connection.sync(PushBench.waitBody(0, wait: 0)).get()
        guard answer.status == .ok else { throw BenchError("the writer's first sync answered \(answer.status.code): \(String(buffer: answer.body))") }
        revision = try SyncAnswer.maxRevision(of: answer.body)
    }

    /// Sends one change set and returns once it is acknowledged.
    mutating func commit() async throws -> Commit {
        seq += 1
        let body = """
            {"maxRevision":\(revision),"changeSets":[{"seq":\(seq),"types":["notes"],"notes":{"create":[\(-seq)],\
            "attributes":{"\(-seq)":{"body":"push \(seq)","pinned":false}}}}]}
            """
        let sent = ContinuousClock.now
        let ack = try await connection.sync(body).get()
        guard ack.status == .ok else { throw BenchError("the writer's change set \(seq) was answered \(ack.status.code): \(String(buffer: ack.body))") }
        let response = try JSONDecoder().decode(SyncResponse.self, from: Data(ack.body.readableBytesView))
        guard response.maxRevision > revision, !response.changeSets.contains(where: { $0.conflict == true }) else {
            throw BenchError("the writer's change set \(seq) was not committed: \(String(buffer: ack.body).prefix(300))")
        }
        revision = response.maxRevision
        return Commit(sent: sent, ack: ack, revision: revision)
    }
}

/// The push bench's servers: started one by one on one database, all stopped at the end.
final class ServerSet {
    let executable: String
    let environment: [String: String]
    let logDirectory: String
    private var servers: [ServerProcess] = []

    init(executable: String, environment: [String: String], logDirectory: String) {
        self.executable = executable
        self.environment = environment
        self.logDirectory = logDirectory
    }

    /// Starts one more instance and waits until it is ready. One at a time, so that only the
    /// first migrates the fresh database.
    func start(port: Int, http: HTTPClient) async throws -> ServerProcess {
        let log = URL(fileURLWithPath: logDirectory).appendingPathComponent("server-\(servers.count).log").path
        let server = try ServerProcess(executable: executable, port: port, environment: environment, logPath: log)
        servers.append(server)
        try await server.waitUntilReady(http: http)
        return server
    }

    func stopAll() async {
        for server in servers { await server.stop() }
        servers = []
    }
}
