import NIOCore
import RevsyncRedis
import RevsyncTestSupport
import Testing

/// Behaviour that needs a Redis of the test's own: flushing it, killing it, restarting it.
@Suite struct RedisClientOwnServerTests {
    @Test func flushAllEmptiesEveryDatabase() async throws {
        let server = try await ThrowawayRedisServer.start()
        defer { server.kill() }
        var databaseOne = server.configuration
        databaseOne.database = 1
        try await RedisClient.withClient(configuration: server.configuration) { client in
            try await RedisClient.withClient(configuration: databaseOne) { other in
                try await client.set("k", ByteBuffer(string: "zero"))
                try await other.set("k", ByteBuffer(string: "one"))
                // SELECT took effect: the same key holds different values per database.
                #expect(try await client.get("k") == ByteBuffer(string: "zero"))
                #expect(try await other.get("k") == ByteBuffer(string: "one"))

                try await client.flushAll()
                #expect(try await client.get("k") == nil)
                #expect(try await other.get("k") == nil)
                #expect(try await client.command(["DBSIZE"]) == .integer(0))
            }
        }
    }

    @Test func databaseOutOfRangeIsAConnectionFailureThatSaysSo() async throws {
        let server = try await ThrowawayRedisServer.start()
        defer { server.kill() }
        var configuration = server.configuration
        configuration.database = 999
        try await RedisClient.withClient(configuration: configuration) { client in
            await #expect {
                try await client.ping()
            } throws: { error in
                guard case .connectionFailed(let endpoint, let reason) = error as? RedisError else { return false }
                return endpoint == "127.0.0.1:\(server.port)" && reason.contains("SELECT 999") && reason.contains("out of range")
            }
        }
    }

    /// A call is not queued behind a command Redis holds (a `BLPOP` here; a write while Redis
    /// is paused for writes, in the server) while another connection is idle. Taken in turn,
    /// every second call of a pool of two would wait behind it, and the `GET`s would fail
    /// with the blocked connection at the command timeout, before the `LPUSH` that frees it.
    @Test func aCallTakesAnIdleConnectionRatherThanQueueBehindABlockedOne() async throws {
        try await Self.withPoolOfTwo { client, control in
            let blocked = Task { try await client.command(["BLPOP", "list", "0"]) }
            try await Self.waitUntil("the BLPOP waiting in Redis") { try await Self.blocked(control) == 1 }
            for _ in 0..<6 {
                #expect(try await client.get("value") == ByteBuffer(string: "here"))
            }
            _ = try await control.command(["LPUSH", "list", "freed"])
            let freed = try await blocked.value
            #expect(freed.arrayValue?.last?.stringValue == "freed")
        }
    }

    /// With every connection open and waiting, a call goes behind the fewest replies: here a
    /// lone `BLPOP` that is freed first, not a pipeline held behind another `BLPOP`. Taken in
    /// turn, the `GET` would land behind the pipeline and fail at the command timeout.
    @Test func withNoConnectionIdleACallTakesTheOneAwaitingTheFewestReplies() async throws {
        try await Self.withPoolOfTwo { client, control in
            let held = Task { try await client.pipeline([["BLPOP", "held", "0"], ["GET", "value"], ["GET", "value"]]) }
            try await Self.waitUntil("the pipeline's BLPOP waiting in Redis") { try await Self.blocked(control) == 1 }
            let freedFirst = Task { try await client.command(["BLPOP", "first", "0"]) }
            try await Self.waitUntil("both BLPOPs waiting in Redis") { try await Self.blocked(control) == 2 }
            let read = Task { try await client.get("value") }
            // The GET is written before the first BLPOP is freed: it waits, unread, in the query
            // buffer of the connection it went to, beside the pipeline's two in the other's.
            try await Self.waitUntil("the GET queued behind the lone BLPOP") { try await Self.blockedWithCommandsBehind(control) == 2 }
            _ = try await control.command(["LPUSH", "first", "x"])
            #expect(try await freedFirst.value.arrayValue?.last?.stringValue == "x")
            #expect(try await read.value == ByteBuffer(string: "here"))
            _ = try await control.command(["LPUSH", "held", "y"])
            #expect(try await held.value.count == 3)
        }
    }

    /// Runs `body` with a client of a Redis of the test's own (a pool of two, a 10 s command
    /// timeout, `value` set to `here`) and a control client of the same server.
    private static func withPoolOfTwo(_ body: (RedisClient, RedisClient) async throws -> Void) async throws {
        let server = try await ThrowawayRedisServer.start()
        defer { server.kill() }
        var configuration = server.configuration
        configuration.poolSize = 2
        configuration.commandTimeout = .seconds(10)
        try await RedisClient.withClient(configuration: configuration) { client in
            try await client.set("value", ByteBuffer(string: "here"))
            try await RedisClient.withClient(configuration: server.configuration) { control in try await body(client, control) }
        }
    }

    /// Connections waiting in a blocking command (`INFO clients`).
    private static func blocked(_ control: RedisClient) async throws -> Int? {
        let info = try await control.command(["INFO", "clients"]).stringValue ?? ""
        return info.split(whereSeparator: \.isNewline).first { $0.hasPrefix("blocked_clients:") }.flatMap { Int($0.dropFirst("blocked_clients:".count)) }
    }

    private static func waitUntil(_ what: String, _ condition: () async throws -> Bool) async throws {
        let deadline = ContinuousClock.now + .seconds(10)
        while try await !condition() {
            guard ContinuousClock.now < deadline else { throw TestSetupError("not within 10 s: \(what)") }
            try await Task.sleep(for: .milliseconds(10))
        }
    }

    /// Blocked connections with commands waiting unread behind their block (`CLIENT LIST`'s `qbuf`).
    private static func blockedWithCommandsBehind(_ control: RedisClient) async throws -> Int {
        let clients = try await control.command(["CLIENT", "LIST"]).stringValue ?? ""
        return clients.split(separator: "\n").filter { line in
            let fields = line.split(separator: " ")
            return fields.contains("flags=b") && fields.contains { $0.hasPrefix("qbuf=") && $0 != "qbuf=0" }
        }.count
    }

    @Test func poolNeverOpensMoreConnectionsThanItsSize() async throws {
        let server = try await ThrowawayRedisServer.start()
        defer { server.kill() }
        var configuration = server.configuration
        configuration.poolSize = 3
        try await RedisClient.withClient(configuration: configuration) { client in
            try await withThrowingTaskGroup(of: Void.self) { group in
                for task in 0..<50 {
                    group.addTask {
                        for _ in 0..<10 { _ = try await client.command(["INCR", "n\(task % 5)"]) }
                    }
                }
                try await group.waitForAll()
            }
            let clients = try await client.command(["CLIENT", "LIST"]).stringValue ?? ""
            let lines = clients.split(separator: "\n").filter { !$0.isEmpty }
            #expect((1...3).contains(lines.count), "CLIENT LIST: \(clients)")
            let counts = try await client.mget((0..<5).map { "n\($0)" })
            #expect(counts == Array(repeating: ByteBuffer(string: "100"), count: 5))
        }
    }

    @Test func clientReconnectsByItselfAfterRedisIsKilledAndRestarted() async throws {
        let server = try await ThrowawayRedisServer.start()
        defer { server.kill() }
        var configuration = server.configuration
        configuration.poolSize = 2
        try await RedisClient.withClient(configuration: configuration) { client in
            // Warm the pool so there are idle connections for the crash to kill.
            try await withThrowingTaskGroup(of: Void.self) { group in
                for index in 0..<8 { group.addTask { try await client.set("k\(index)", ByteBuffer(string: "v")) } }
                try await group.waitForAll()
            }

            server.kill()
            for _ in 0..<5 {
                let took = await elapsed {
                    await #expect {
                        try await client.get("k0")
                    } throws: { error in
                        guard let error = error as? RedisError else { return false }
                        return error.isUnavailable && "\(error)".contains("127.0.0.1:\(server.port)")
                    }
                }
                #expect(took < .seconds(3), "a call while Redis is down took \(took)")
            }

            try await server.start()
            var attempts = 0
            let recovery = try await elapsed {
                while true {
                    attempts += 1
                    do {
                        try await client.ping()
                        return
                    } catch let error as RedisError where error.isUnavailable && attempts < 40 {
                        try await Task.sleep(for: .milliseconds(50))
                    }
                }
            }
            #expect(recovery < .seconds(5), "recovered after \(attempts) attempts in \(recovery)")
            // The restarted server kept nothing (no persistence); the client writes and reads again.
            #expect(try await client.get("k0") == nil)
            try await client.set("k0", ByteBuffer([0x00, 0x01]))
            #expect(try await client.get("k0") == ByteBuffer([0x00, 0x01]))
        }
    }

    @Test func restartBetweenCallsCostsTheCallersNothing() async throws {
        let server = try await ThrowawayRedisServer.start()
        defer { server.kill() }
        var configuration = server.configuration
        configuration.poolSize = 2
        try await RedisClient.withClient(configuration: configuration) { client in
            try await withThrowingTaskGroup(of: Void.self) { group in
                for _ in 0..<4 { group.addTask { try await client.ping() } }
                try await group.waitForAll()
            }
            server.kill()
            try await server.start()
            // Idle connections to the dead server are noticed before use and replaced.
            for _ in 0..<4 { try await client.ping() }
        }
    }

    @Test func scriptIsResentWhenRedisHasForgottenIt() async throws {
        let server = try await ThrowawayRedisServer.start()
        defer { server.kill() }
        try await RedisClient.withClient(configuration: server.configuration) { client in
            let script = "return redis.call('INCRBY', KEYS[1], ARGV[1])"
            #expect(try await client.eval(script: script, keys: ["n"], args: ["2"]) == .integer(2))
            #expect(try await client.eval(script: script, keys: ["n"], args: ["3"]) == .integer(5))
            _ = try await client.command(["SCRIPT", "FLUSH"])
            #expect(try await client.eval(script: script, keys: ["n"], args: ["4"]) == .integer(9))
            #expect(try await client.eval(script: script, keys: ["n"], args: ["1"]) == .integer(10))
        }
    }
}
