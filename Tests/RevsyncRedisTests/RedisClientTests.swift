import NIOCore
import RevsyncRedis
import Testing

/// Behaviour against the shared Redis (Scripts/stack); every test keeps to its own keys.
@Suite struct RedisClientTests {
    /// Bytes that break naive C-string or UTF-8 handling: NUL, SOH, CR LF, invalid UTF-8.
    static let awkwardBytes: [UInt8] = [0x00, 0x01, 0x0D, 0x0A, 0xFF, 0xFE, 0xC3, 0x28, 0x80] + Array(#"{"id":1}"#.utf8)

    @Test func setAndGetAreBinarySafe() async throws {
        try await SharedTestRedis.withClient { client, keys in
            let value = ByteBuffer(Self.awkwardBytes)
            try await client.set(keys("blob"), value)
            let read = try await client.get(keys("blob"))
            #expect(read.map { Array($0.readableBytesView) } == Self.awkwardBytes)
            #expect(try await client.get(keys("missing")) == nil)
            let empty = ByteBuffer()
            try await client.set(keys("empty"), empty)
            #expect(try await client.get(keys("empty")) == empty)
        }
    }

    @Test func mgetKeepsOrderAndGivesNilForMissingKeys() async throws {
        try await SharedTestRedis.withClient { client, keys in
            try await client.set(keys("a"), ByteBuffer(Self.awkwardBytes))
            try await client.set(keys("c"), ByteBuffer([0x01]))
            let values = try await client.mget([keys("a"), keys("b"), keys("c"), keys("d")])
            #expect(values.map { $0.map { Array($0.readableBytesView) } } == [Self.awkwardBytes, nil, [0x01], nil])
            #expect(try await client.mget([]).isEmpty)
        }
    }

    @Test func setWithExpiryGivesTheKeyATimeToLive() async throws {
        try await SharedTestRedis.withClient { client, keys in
            try await client.set(keys("ttl"), ByteBuffer(string: "x"), expireSeconds: 100)
            let ttl = try await client.command(["TTL", keys("ttl")])
            #expect((1...100).contains(ttl.int64Value ?? -1))
            #expect(try await client.del([keys("ttl"), keys("never")]) == 1)
        }
    }

    @Test func pipelineOfAThousandSetsIsReadBackWithMget() async throws {
        try await SharedTestRedis.withClient { client, keys in
            let names = (0..<1000).map { keys("p\($0)") }
            let sets = names.enumerated().map { index, name in
                [ByteBuffer(string: "SET"), ByteBuffer(string: name), ByteBuffer([0x00, UInt8(index % 256), 0xFF] + Array("v\(index)".utf8))]
            }
            let replies = try await client.pipeline(sets)
            #expect(replies.count == 1000)
            #expect(replies.allSatisfy { $0 == .status("OK") })

            let values = try await client.mget(names)
            #expect(values.count == 1000)
            for (index, value) in values.enumerated() {
                #expect(value.map { Array($0.readableBytesView) } == [0x00, UInt8(index % 256), 0xFF] + Array("v\(index)".utf8))
            }
        }
    }

    @Test func errorReplySurfacesWithRedisMessage() async throws {
        try await SharedTestRedis.withClient { client, keys in
            try await client.set(keys("string"), ByteBuffer(string: "x"))
            await #expect {
                try await client.command(["LPUSH", keys("string"), "y"])
            } throws: { error in
                guard case .server(let message) = error as? RedisError else { return false }
                return message.hasPrefix("WRONGTYPE")
            }
            // The connection is still in step after an error reply.
            #expect(try await client.get(keys("string")) == ByteBuffer(string: "x"))
        }
    }

    @Test func pipelineReturnsErrorRepliesInPlace() async throws {
        try await SharedTestRedis.withClient { client, keys in
            let replies = try await client.pipeline([
                ["SET", keys("s"), "1"],
                ["LPUSH", keys("s"), "x"],
                ["INCR", keys("s")],
                ["NOSUCHCOMMAND"],
            ])
            #expect(replies.count == 4)
            #expect(replies[0] == .status("OK"))
            guard case .error(let wrongType) = replies[1], case .error(let unknown) = replies[3] else {
                Issue.record("expected error replies, got \(replies)")
                return
            }
            #expect(wrongType.hasPrefix("WRONGTYPE"))
            #expect(unknown.hasPrefix("ERR unknown command"))
            #expect(replies[2] == .integer(2))
        }
    }

    @Test func repliesOfEveryKindAreConverted() async throws {
        try await SharedTestRedis.withClient { client, keys in
            let replies = try await client.pipeline([
                ["RPUSH", keys("list"), "a", "", "c"],
                ["LRANGE", keys("list"), "0", "-1"],
                ["LRANGE", keys("none"), "0", "-1"],
                ["PING"],
                ["GET", keys("none")],
            ])
            #expect(replies == [
                .integer(3),
                .array([.bulk(ByteBuffer(string: "a")), .bulk(ByteBuffer()), .bulk(ByteBuffer(string: "c"))]),
                .array([]),
                .status("PONG"),
                .null,
            ])
        }
    }

    static let setIfGreater = """
        local current = redis.call('GET', KEYS[1])
        if current == false or tonumber(ARGV[1]) > tonumber(current) then
            redis.call('SET', KEYS[1], ARGV[1])
            return 1
        end
        return 0
        """

    @Test func concurrentSetIfGreaterScriptEndsAtTheMaximum() async throws {
        try await SharedTestRedis.withClient { client, keys in
            let counter = keys("counter")
            let values = Array(1...200).shuffled()
            let advanced = try await withThrowingTaskGroup(of: Int64.self) { group in
                for value in values {
                    group.addTask {
                        let reply = try await client.eval(script: Self.setIfGreater, keys: [counter], args: [String(value)])
                        return reply.int64Value ?? -1
                    }
                }
                return try await group.reduce(into: [Int64]()) { $0.append($1) }
            }
            #expect(advanced.allSatisfy { $0 == 0 || $0 == 1 })
            #expect(advanced.contains(1))
            #expect(try await client.get(counter) == ByteBuffer(string: "200"))
            // A lower value afterwards does not move it back.
            #expect(try await client.eval(script: Self.setIfGreater, keys: [counter], args: ["5"]) == .integer(0))
        }
    }

    @Test func scriptReceivesBinaryArgumentsIntact() async throws {
        try await SharedTestRedis.withClient { client, keys in
            let value = ByteBuffer(Self.awkwardBytes)
            let reply = try await client.eval(
                script: "redis.call('SET', KEYS[1], ARGV[1]); return redis.call('GET', KEYS[1])",
                keys: [keys("doc")], binaryArgs: [value])
            #expect(reply == .bulk(value))
            #expect(try await client.get(keys("doc")) == value)
        }
    }

    @Test func scriptErrorSurfacesAsServerError() async throws {
        try await SharedTestRedis.withClient { client, keys in
            await #expect {
                try await client.eval(script: "return redis.error_reply('NOPE the script said no')", keys: [keys("k")])
            } throws: { error in
                guard case .server(let message) = error as? RedisError else { return false }
                return message.contains("NOPE the script said no")
            }
        }
    }

    @Test func fiftyConcurrentTasksShareTheSmallPool() async throws {
        try await SharedTestRedis.withClient(configure: { $0.poolSize = 4 }) { client, keys in
            try await withThrowingTaskGroup(of: Void.self) { group in
                for task in 0..<50 {
                    group.addTask {
                        for round in 0..<20 {
                            let value = ByteBuffer([0x00, UInt8(task), UInt8(round)] + Array("t\(task)r\(round)".utf8))
                            try await client.set(keys("task\(task)"), value)
                            let read = try await client.get(keys("task\(task)"))
                            #expect(read == value)
                            let counted = try await client.command(["INCR", keys("total")])
                            #expect(counted.int64Value != nil)
                        }
                    }
                }
                try await group.waitForAll()
            }
            #expect(try await client.get(keys("total")) == ByteBuffer(string: "1000"))
        }
    }

    @Test func commandTimeoutFailsTheCallAndTheNextCallWorks() async throws {
        // Three seconds, not less: replies are read on the event loops every suite shares, and a
        // loaded machine once held a new connection's PING reply past 200 ms, and in the whole
        // suite's first minute the PING after the timeout past 1 s.
        try await SharedTestRedis.withClient(configure: { $0.commandTimeout = .seconds(3); $0.poolSize = 1 }) {
            client, keys in
            // BLPOP on an empty list keeps only this connection waiting, server-side, for 30 s.
            let took = await elapsed {
                await #expect {
                    try await client.command(["BLPOP", keys("empty-list"), "30"])
                } throws: { error in
                    guard case .timeout(let endpoint, let after) = error as? RedisError else { return false }
                    return endpoint == client.configuration.endpoint && after == .seconds(3)
                }
            }
            // Failed by the client's timeout, well before Redis would have answered.
            #expect(took < .seconds(20))
            // With a pool of one, this must run on a new connection, the timed-out one being dead.
            try await client.ping()
        }
    }

    @Test func callsAfterShutdownFail() async throws {
        let client = try RedisClient(configuration: try SharedTestRedis.configuration())
        try await client.ping()
        await client.shutdown()
        await client.shutdown()
        await #expect(throws: RedisError.shutDown) { try await client.ping() }
    }

    @Test func runShutsTheClientDownWhenCancelled() async throws {
        let client = try RedisClient(configuration: try SharedTestRedis.configuration())
        try await client.ping()
        let service = Task { try await client.run() }
        service.cancel()
        try await service.value
        await #expect(throws: RedisError.shutDown) { try await client.ping() }
    }
}
