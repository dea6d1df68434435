import NIOCore
import RevsyncLink
import RevsyncRedis
import RevsyncTestSupport
import Synchronization
import Testing

/// `RedisSubscription` against the shared Redis: several channels on one connection.
@Suite struct RedisSubscriptionTests {
    /// What the follower was told, in order.
    final class Heard: Sendable {
        let messages = Mutex<[String]>([])
        let subscriptions = Atomic<Int>(0)
        let losses = Atomic<Int>(0)

        var all: [String] { messages.withLock { $0 } }

        /// Runs `subscription` until cancelled, counting what it is told and keeping each message's payload.
        func follow(_ subscription: RedisSubscription) async {
            await subscription.run(
                subscribed: { self.subscriptions.add(1, ordering: .relaxed) },
                lost: { self.losses.add(1, ordering: .relaxed) },
                message: { _, payload in self.messages.withLock { $0.append(String(buffer: payload)) } })
        }
    }

    /// Each message arrives with its own channel, in the order published, and a channel the
    /// subscription does not name is not heard.
    @Test func messagesOfEveryChannelArriveWithTheirChannel() async throws {
        try await SharedTestRedis.withClient { client, keys in
            let first = keys("first"), second = keys("second"), other = keys("other")
            let heard = Heard()
            let subscription = RedisSubscription(configuration: try SharedTestRedis.configuration(), channels: [first, second], logger: .init(label: "test"))
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask {
                    await subscription.run(
                        subscribed: { heard.subscriptions.add(1, ordering: .relaxed) },
                        message: { channel, payload in heard.messages.withLock { $0.append("\(channel == first ? "first" : channel == second ? "second" : channel)=\(String(buffer: payload))") } })
                }
                try await eventually { heard.subscriptions.load(ordering: .relaxed) == 1 }
                // Both channels are followed as soon as the first confirmation came.
                for (channel, payload) in [(second, "1"), (other, "x"), (first, "2"), (second, "3")] {
                    _ = try await client.command(["PUBLISH", channel, payload])
                }
                try await eventually { heard.all.count == 3 }
                group.cancelAll()
            }
            #expect(heard.all == ["second=1", "first=2", "second=3"])
            #expect(heard.subscriptions.load(ordering: .relaxed) == 1)
        }
    }

    /// The subscription's `PING`s run while messages arrive: a message that comes between a
    /// `PING` and its reply is heard, not taken for the reply (and the reply is not taken for a message).
    @Test func messagesPublishedWhilePingsWaitAreAllHeardInOrder() async throws {
        try await SharedTestRedis.withClient { client, keys in
            let channel = keys("busy")
            let heard = Heard()
            var subscription = RedisSubscription(configuration: try SharedTestRedis.configuration(), channels: [channel], logger: .init(label: "test"))
            subscription.pingInterval = .milliseconds(1)
            let follower = subscription
            let count = 2_000
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { await heard.follow(follower) }
                try await eventually { heard.subscriptions.load(ordering: .relaxed) == 1 }
                for index in 0..<count {
                    _ = try await client.command(["PUBLISH", channel, String(index)])
                }
                try await eventually { heard.all.count >= count }
                group.cancelAll()
            }
            #expect(heard.all == (0..<count).map(String.init))
            #expect(heard.subscriptions.load(ordering: .relaxed) == 1)
            #expect(heard.losses.load(ordering: .relaxed) == 0)
        }
    }

    /// A path that dies without a reset (the relay throws every byte away and closes nothing) is
    /// noticed by the subscription's `PING` going unanswered: the follower is told, and once the
    /// path is back a new connection subscribes and hears what is published.
    @Test func aPathThatDiesSilentlyEndsTheSubscriptionWhichStartsAgainOnceHealed() async throws {
        try await SharedTestRedis.withClient { client, keys in
            let channel = keys("dropped")
            var configuration = try SharedTestRedis.configuration()
            let relay = try await TCPRelay.start(to: configuration.host, port: configuration.port)
            configuration.host = "127.0.0.1"
            configuration.port = relay.port
            configuration.commandTimeout = .milliseconds(500)
            let heard = Heard()
            var subscription = RedisSubscription(configuration: configuration, channels: [channel], logger: .init(label: "test"))
            subscription.pingInterval = .milliseconds(200)
            subscription.retryDelay = .milliseconds(100)
            let follower = subscription
            do {
                try await withThrowingTaskGroup(of: Void.self) { group in
                    group.addTask { await heard.follow(follower) }
                    try await eventually { heard.subscriptions.load(ordering: .relaxed) == 1 }
                    _ = try await client.command(["PUBLISH", channel, "before"])
                    try await eventually { heard.all == ["before"] }
                    await relay.cut(.drop)
                    try await eventually(within: .seconds(10)) { heard.losses.load(ordering: .relaxed) >= 1 }
                    relay.heal()
                    try await eventually(within: .seconds(10)) { heard.subscriptions.load(ordering: .relaxed) >= 2 }
                    _ = try await client.command(["PUBLISH", channel, "after"])
                    try await eventually { heard.all == ["before", "after"] }
                    group.cancelAll()
                }
            } catch {
                await relay.stop()
                throw error
            }
            await relay.stop()
        }
    }

    private func eventually(within limit: Duration = .seconds(30), _ condition: () -> Bool) async throws {
        let deadline = ContinuousClock.now + limit
        while !condition() {
            guard ContinuousClock.now < deadline else { throw TestSetupError("the condition did not hold within \(limit)") }
            try await Task.sleep(for: .milliseconds(10))
        }
    }
}
