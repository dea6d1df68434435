import NIOCore
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

        var all: [String] { messages.withLock { $0 } }
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

    private func eventually(_ condition: () -> Bool) async throws {
        let deadline = ContinuousClock.now + .seconds(30)
        while !condition() {
            guard ContinuousClock.now < deadline else { throw TestSetupError("the condition did not hold within 30 s") }
            try await Task.sleep(for: .milliseconds(10))
        }
    }
}
