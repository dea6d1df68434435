import NIOCore
import NIOPosix
import RevsyncLink
import Synchronization
import Testing

@Suite("TCP relay")
struct TCPRelayTests {
    @Test func bytesPassBothWays() async throws {
        try await withRelayToEcho { relay in
            let client = try await RelayClient.connect(port: relay.port)
            try await client.send("ping")
            #expect(try await client.read(within: .seconds(5)) == "ping")
            try await client.send("pong")
            #expect(try await client.read(within: .seconds(5)) == "pong")
            await client.close()
        }
    }

    @Test func aResetClosesEveryConnectionAndRefusesNewOnesUntilHealed() async throws {
        try await withRelayToEcho { relay in
            let client = try await RelayClient.connect(port: relay.port)
            try await client.send("a")
            #expect(try await client.read(within: .seconds(5)) == "a")
            await relay.cut(.reset)
            #expect(relay.cut == .reset)
            #expect(try await client.read(within: .seconds(5)) == nil, "the relayed connection was closed")
            // The kernel accepts it; the relay closes it at once.
            let refused = try await RelayClient.connect(port: relay.port)
            #expect(try await refused.read(within: .seconds(5)) == nil)
            relay.heal()
            let healed = try await RelayClient.connect(port: relay.port)
            try await healed.send("b")
            #expect(try await healed.read(within: .seconds(5)) == "b")
            await healed.close()
        }
    }

    @Test func aSilentCutHoldsBytesUntilHealedAndClosesNothing() async throws {
        try await withRelayToEcho { relay in
            let client = try await RelayClient.connect(port: relay.port)
            try await client.send("before")
            #expect(try await client.read(within: .seconds(5)) == "before")
            await relay.cut(.silent)
            try await client.send("during")
            let fresh = try await RelayClient.connect(port: relay.port)
            try await fresh.send("new")
            #expect(try await client.read(within: .milliseconds(400)) == "", "nothing passes, and the connection stays open")
            #expect(try await fresh.read(within: .milliseconds(100)) == "")
            relay.heal()
            #expect(try await client.read(within: .seconds(5)) == "during")
            #expect(try await fresh.read(within: .seconds(5)) == "new")
            await client.close()
            await fresh.close()
        }
    }

    @Test func aDropKillsTheOpenConnectionsForGoodAndLetsNewOnesPassOnceHealed() async throws {
        try await withRelayToEcho { relay in
            let client = try await RelayClient.connect(port: relay.port)
            try await client.send("before")
            #expect(try await client.read(within: .seconds(5)) == "before")
            await relay.cut(.drop)
            #expect(relay.cut == .drop)
            try await client.send("during")
            let fresh = try await RelayClient.connect(port: relay.port)
            try await fresh.send("new")
            #expect(try await client.read(within: .milliseconds(400)) == "", "nothing passes, and the connection stays open")
            #expect(try await fresh.read(within: .milliseconds(100)) == "")
            relay.heal()
            #expect(try await fresh.read(within: .seconds(5)) == "new", "a connection made during the drop passes once healed")
            try await client.send("after")
            #expect(try await client.read(within: .milliseconds(500)) == "", "the killed connection stays dead, and open")
            #expect(relay.openConnections == 2)
            await client.close()
            try await waitUntil { relay.openConnections == 1 }
            let later = try await RelayClient.connect(port: relay.port)
            try await later.send("later")
            #expect(try await later.read(within: .seconds(5)) == "later")
            await fresh.close()
            await later.close()
        }
    }

    @Test func aConnectionItsClientClosesDuringASilentCutIsLetGo() async throws {
        try await withRelayToEcho { relay in
            let relayed = try await RelayClient.connect(port: relay.port)
            try await relayed.send("x")
            #expect(try await relayed.read(within: .seconds(5)) == "x")
            await relay.cut(.silent)
            let waiting = try await RelayClient.connect(port: relay.port)
            try await relayed.send("held")
            try await waitUntil { relay.openConnections == 2 }
            await relayed.close()
            await waiting.close()
            try await waitUntil { relay.openConnections == 0 }
            relay.heal()
        }
    }
}

/// Runs `body` with a relay in front of a TCP echo server on 127.0.0.1; stops both after.
private func withRelayToEcho(_ body: (TCPRelay) async throws -> Void) async throws {
    let echo = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
        .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
        .childChannelInitializer { channel in
            channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(EchoHandler()) }
        }
        .bind(host: "127.0.0.1", port: 0).get()
    let relay = try await TCPRelay.start(to: "127.0.0.1", port: try #require(echo.localAddress?.port))
    do {
        try await body(relay)
    } catch {
        await relay.stop()
        try? await echo.close()
        throw error
    }
    await relay.stop()
    try await echo.close()
}

private final class EchoHandler: ChannelInboundHandler, Sendable {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        context.writeAndFlush(data, promise: nil)
    }
}

/// A raw connection to the relay; a task of its own reads what arrives.
private final class RelayClient: Sendable {
    private let channel: NIOAsyncChannel<ByteBuffer, ByteBuffer>
    /// What arrived and was not read yet, and whether the connection ended.
    private let received = Received()
    private let reader: Task<Void, Never>

    private init(channel: NIOAsyncChannel<ByteBuffer, ByteBuffer>) {
        self.channel = channel
        let received = self.received
        reader = Task {
            do {
                for try await bytes in channel.inbound { received.withLock { $0.text += String(buffer: bytes) } }
            } catch {}
            received.withLock { $0.ended = true }
        }
    }

    static func connect(port: Int) async throws -> RelayClient {
        let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .connect(host: "127.0.0.1", port: port) { channel in
                channel.eventLoop.makeCompletedFuture { try NIOAsyncChannel<ByteBuffer, ByteBuffer>(wrappingChannelSynchronously: channel) }
            }
        return RelayClient(channel: channel)
    }

    func send(_ text: String) async throws { try await channel.outbound.write(ByteBuffer(string: text)) }

    /// What arrived since the last read, once something has (and 20 ms more for the rest of
    /// it); "" when nothing came within `limit`, nil when the connection ended without more.
    func read(within limit: Duration) async throws -> String? {
        let deadline = ContinuousClock.now + limit
        while ContinuousClock.now < deadline {
            let (text, ended) = received.withLock { ($0.text, $0.ended) }
            if !text.isEmpty {
                try await Task.sleep(for: .milliseconds(20))
                return received.withLock { state in
                    defer { state.text = "" }
                    return state.text
                }
            }
            if ended { return nil }
            try await Task.sleep(for: .milliseconds(10))
        }
        return ""
    }

    func close() async {
        try? await channel.channel.close()
        await reader.value
    }
}

/// What a client's reader received: the text not read yet, and whether the connection ended.
private final class Received: Sendable {
    private let mutex = Mutex<(text: String, ended: Bool)>(("", false))
    func withLock<T: Sendable>(_ body: (inout (text: String, ended: Bool)) -> T) -> T { mutex.withLock { body(&$0) } }
}

/// Polls `condition` every 20 ms for up to five seconds.
private func waitUntil(_ condition: () -> Bool) async throws {
    let deadline = ContinuousClock.now + .seconds(5)
    while !condition() {
        guard ContinuousClock.now < deadline else {
            Issue.record("the condition did not hold within five seconds")
            return
        }
        try await Task.sleep(for: .milliseconds(20))
    }
}
