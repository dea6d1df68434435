import NIOCore
import NIOEmbedded
import Synchronization
import Testing

@testable import RevsyncRedis

/// The handler on an embedded channel: replies fed by hand, time moved by hand.
@Suite struct RedisCommandHandlerTests {
    let channel: EmbeddedChannel
    var pushed: [RedisValue] { pushedValues.values.withLock { $0 } }
    private let pushedValues = Pushed()

    private final class Pushed: Sendable {
        let values = Mutex<[RedisValue]>([])
    }

    init() throws {
        try self.init(subscribed: false)
    }

    init(subscribed: Bool) throws {
        channel = EmbeddedChannel()
        let box = pushedValues
        let push: @Sendable (RedisValue) -> Void = { value in box.values.withLock { $0.append(value) } }
        let handler = RedisCommandHandler(
            endpoint: "127.0.0.1:6379", commandTimeout: .seconds(2), pushed: subscribed ? push : nil)
        try channel.pipeline.syncOperations.addHandlers(ByteToMessageHandler(RESPReplyDecoder()), handler)
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 6379)).wait()
    }

    /// Writes `commands` as one request and returns what it will be answered with.
    func send(_ commands: [[String]]) throws -> EventLoopFuture<[RedisValue]> {
        let promise = channel.eventLoop.makePromise(of: [RedisValue].self)
        let bytes = try RESPCommandEncoder.encode(commands.map { $0.map { ByteBuffer(string: $0) } })
        channel.writeAndFlush(RedisRequest(bytes: bytes, replyCount: commands.count, promise: promise), promise: nil)
        return promise.futureResult
    }

    func reply(_ wire: String) throws {
        try channel.writeInbound(ByteBuffer(string: wire))
    }

    /// The request's outcome, or `nil` while it still waits.
    func outcome(_ future: EventLoopFuture<[RedisValue]>) -> Result<[RedisValue], any Error>? {
        var result: Result<[RedisValue], any Error>?
        future.assumeIsolated().whenComplete { result = $0 }
        return result
    }

    func isWaiting(_ future: EventLoopFuture<[RedisValue]>) -> Bool { outcome(future) == nil }

    @Test func pipelinedRequestsTakeTheirRepliesInOrderEvenWhenTheyArriveSplit() throws {
        let first = try send([["SET", "a", "1"], ["GET", "a"], ["GET", "b"]])
        let second = try send([["PING"]])
        // The bytes of four replies, cut in the middle of the second and at the end of the third.
        try reply("+OK\r\n$1\r")
        #expect(isWaiting(first))
        try reply("\n1\r\n$-1\r\n")
        #expect(try outcome(first)?.get() == [.status("OK"), .bulk(ByteBuffer(string: "1")), .null])
        #expect(isWaiting(second))
        try reply("+PONG\r\n")
        #expect(try outcome(second)?.get() == [.status("PONG")])
        #expect(channel.isActive)
    }

    @Test func silenceForTheCommandTimeoutFailsEveryWaitingRequestAndCloses() throws {
        let first = try send([["GET", "a"]])
        let second = try send([["GET", "b"]])
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(1_500))
        // Bytes arriving (even part of a reply) show Redis is alive: the wait starts again.
        try reply("$5\r\nhel")
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(1_900))
        #expect(isWaiting(first))
        #expect(channel.isActive)
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(200))
        for future in [first, second] {
            guard case .failure(let error) = outcome(future) else {
                Issue.record("still waiting after 2.1 s of silence")
                continue
            }
            #expect(error as? RedisError == .timeout(endpoint: "127.0.0.1:6379", after: .seconds(2)))
        }
        #expect(!channel.isActive)
    }

    @Test func aReplyNobodyAskedForIsAProtocolErrorOnACommandConnection() throws {
        try reply("+OK\r\n")
        #expect(!channel.isActive)
    }

    @Test func repliesNobodyAskedForArePushedOnASubscribedConnection() throws {
        let tests = try RedisCommandHandlerTests(subscribed: true)
        let subscribe = try tests.send([["SUBSCRIBE", "c"]])
        try tests.reply("*3\r\n$9\r\nsubscribe\r\n$1\r\nc\r\n:1\r\n*3\r\n$7\r\nmessage\r\n$1\r\nc\r\n$2\r\n42\r\n")
        #expect(try tests.outcome(subscribe)?.get().count == 1)
        #expect(tests.pushed == [.array([.bulk(ByteBuffer(string: "message")), .bulk(ByteBuffer(string: "c")), .bulk(ByteBuffer(string: "42"))])])
        // Nothing waits, so no timeout runs while the subscription is quiet.
        tests.channel.embeddedEventLoop.advanceTime(by: .seconds(60))
        #expect(tests.channel.isActive)
    }

    @Test func aMessageArrivingWhileACommandWaitsIsPushedNotTakenForItsReply() throws {
        let tests = try RedisCommandHandlerTests(subscribed: true)
        let subscribe = try tests.send([["SUBSCRIBE", "c"]])
        try tests.reply("*3\r\n$9\r\nsubscribe\r\n$1\r\nc\r\n:1\r\n")
        #expect(try tests.outcome(subscribe)?.get().count == 1)
        let ping = try tests.send([["PING"]])
        try tests.reply("*3\r\n$7\r\nmessage\r\n$1\r\nc\r\n$1\r\n7\r\n*4\r\n$8\r\npmessage\r\n$1\r\n*\r\n$1\r\nc\r\n$1\r\n8\r\n")
        #expect(tests.isWaiting(ping))
        try tests.reply("*2\r\n$4\r\npong\r\n$0\r\n\r\n")
        #expect(try tests.outcome(ping)?.get() == [.array([.bulk(ByteBuffer(string: "pong")), .bulk(ByteBuffer(string: ""))])])
        #expect(tests.pushed.count == 2)
        #expect(tests.pushed.first == .array([.bulk(ByteBuffer(string: "message")), .bulk(ByteBuffer(string: "c")), .bulk(ByteBuffer(string: "7"))]))
    }

    @Test func withoutASubscriptionAReplyShapedLikeAMessageAnswersTheCommand() throws {
        let waiting = try send([["LRANGE", "l", "0", "-1"]])
        try reply("*3\r\n$7\r\nmessage\r\n$1\r\nc\r\n$1\r\n7\r\n")
        #expect(try outcome(waiting)?.get().count == 1)
    }

    @Test func closingForShutdownFailsWaitingRequestsWithShutDown() throws {
        let waiting = try send([["GET", "a"]])
        channel.pipeline.triggerUserOutboundEvent(CloseConnection(error: .shutDown), promise: nil)
        guard case .failure(let error) = outcome(waiting) else {
            Issue.record("still waiting after the close")
            return
        }
        #expect(error as? RedisError == .shutDown)
        #expect(!channel.isActive)
    }
}
