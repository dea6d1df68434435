import NIOCore
import NIOPosix
import Synchronization

/// A raw TCP relay on 127.0.0.1 that can be cut and healed. The soak puts one between each
/// server instance and Redis, so that one instance alone can lose Redis (a network partition
/// between it and Redis) while the others keep theirs.
///
/// Bytes pass as they come, each direction with the other side's back pressure. A cut is one
/// of three kinds (``Cut``): connections reset; a silent partition that holds every byte until
/// the relay is healed, as TCP does while its packets are dropped; or connections that die
/// without a word and stay dead after the heal.
public final class TCPRelay: Sendable {
    /// How a cut looks from the relayed connections' ends.
    public enum Cut: String, Sendable, CaseIterable {
        /// Every relayed connection is closed, and each new one at once until healed: a path
        /// that fails loudly (a host's network restarted, a firewall that rejects).
        case reset
        /// Nothing passes either way, and nothing is closed: new connections are accepted and
        /// wait; whatever was sent meanwhile arrives once healed. The end that waits for an
        /// answer learns of it only from its own timeout (a path whose packets are dropped).
        case silent
        /// The connections open at the cut go dead for good: what either end sends is thrown
        /// away, during the cut and after the heal, and nothing is closed (a NAT's or load
        /// balancer's entry lost, the address moved to another host). Each end learns of it only
        /// from its own timeouts, and must connect anew. New connections wait as in a silent
        /// cut and pass once healed (TCP retrying its handshake).
        case drop
    }

    /// The port the relay listens on, on 127.0.0.1.
    public let port: Int
    private let listener: NIOAsyncChannel<NIOAsyncChannel<ByteBuffer, ByteBuffer>, Never>
    private let state = Shared()
    private let accepting: Task<Void, Never>

    /// What the accepting task and the connections' tasks share with the relay.
    private final class Shared: Sendable {
        private let mutex = Mutex(State())
        func withLock<T: Sendable>(_ body: (inout State) -> T) -> T { mutex.withLock { body(&$0) } }
    }

    private struct State {
        var cut: Cut? = nil
        /// Both channels of every relayed connection (one until the upstream one is open), by the accepted channel.
        var open: [ObjectIdentifier: [any Channel]] = [:]
        /// The relayed connections a ``Cut/drop`` killed: their bytes are thrown away until they close.
        var dead: Set<ObjectIdentifier> = []

        /// Whether bytes are held (not thrown away, not passed) for now.
        var holds: Bool { cut == .silent || cut == .drop }
    }

    /// Starts relaying connections to `host`:`port`.
    public static func start(
        to host: String, port: Int, group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton
    ) async throws -> TCPRelay {
        let listener = try await ServerBootstrap(group: group)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
            .bind(host: "127.0.0.1", port: 0) { channel in
                channel.eventLoop.makeCompletedFuture {
                    try NIOAsyncChannel<ByteBuffer, ByteBuffer>(wrappingChannelSynchronously: channel)
                }
            }
        guard let bound = listener.channel.localAddress?.port else {
            try? await listener.channel.close()
            throw TCPRelayError("the relay's listening socket has no port")
        }
        return TCPRelay(listener: listener, port: bound, upstream: Upstream(host: host, port: port))
    }

    private init(listener: NIOAsyncChannel<NIOAsyncChannel<ByteBuffer, ByteBuffer>, Never>, port: Int, upstream: Upstream) {
        self.listener = listener
        self.port = port
        let state = self.state
        accepting = Task {
            try? await listener.executeThenClose { inbound in
                try await withThrowingDiscardingTaskGroup { group in
                    for try await connection in inbound {
                        group.addTask { await Self.relay(connection, to: upstream, state: state) }
                    }
                }
            }
        }
    }

    /// The cut in force, nil while bytes pass.
    public var cut: Cut? { state.withLock { $0.cut } }

    /// The number of connections the relay holds open (each with its upstream one, once made).
    public var openConnections: Int { state.withLock { $0.open.count } }

    /// Cuts the relay until ``heal()``: see ``Cut``.
    public func cut(_ kind: Cut) async {
        let channels = state.withLock { state in
            state.cut = kind
            if kind == .drop { state.dead.formUnion(state.open.keys) }
            return kind == .reset ? state.open.values.flatMap { $0 } : []
        }
        for channel in channels { try? await channel.close() }
    }

    /// Lets bytes and new connections pass again; a silent cut's held bytes go on their way (a
    /// dropped cut's dead connections stay dead).
    public func heal() {
        state.withLock { $0.cut = nil }
    }

    /// Stops listening and closes every connection.
    public func stop() async {
        await cut(.reset)
        try? await listener.channel.close()
        await accepting.value
    }

    private struct Upstream: Sendable {
        let host: String
        let port: Int
    }

    /// How often a cut that holds bytes is looked at: it lasts seconds, and a
    /// held byte may arrive this much later than the heal.
    private static let holdPoll: Duration = .milliseconds(20)

    /// Waits while a silent or dropping cut holds the relay; throws when cancelled, or when one of
    /// `channels` closes meanwhile (no one reads it while its bytes are held, so its closing
    /// would go unnoticed).
    private static func passSilentCut(_ state: Shared, watching channels: Closing) async throws {
        while state.withLock({ $0.holds }) {
            guard !channels.closed else { throw ChannelError.ioOnClosedChannel }
            try await Task.sleep(for: holdPoll)
        }
    }

    /// Whether bytes read on the relayed connection `key` go on: false when a drop killed it
    /// (they are thrown away, and reading goes on so that neither end is held by back pressure),
    /// after waiting out a cut that holds them.
    private static func pass(_ key: ObjectIdentifier, _ state: Shared, watching channels: Closing) async throws -> Bool {
        guard !state.withLock({ $0.dead.contains(key) }) else { return false }
        try await passSilentCut(state, watching: channels)
        // A drop that began while these bytes were held killed the connection with them.
        return !state.withLock { $0.dead.contains(key) }
    }

    /// Whether any of some channels has closed. (`Channel.isActive` is no use here: an
    /// accepted channel may not be active yet when it is handed over.)
    private final class Closing: Sendable {
        private let flag = Atomic<Bool>(false)
        var closed: Bool { flag.load(ordering: .relaxed) }

        func watch(_ channel: any Channel) {
            channel.closeFuture.whenComplete { _ in self.flag.store(true, ordering: .relaxed) }
        }
    }

    private static func relay(_ connection: NIOAsyncChannel<ByteBuffer, ByteBuffer>, to upstream: Upstream, state: Shared) async {
        let key = ObjectIdentifier(connection.channel)
        let admitted = state.withLock { state in
            guard state.cut != .reset else { return false }
            state.open[key] = [connection.channel]
            return true
        }
        guard admitted else {
            try? await connection.channel.close()
            return
        }
        defer {
            state.withLock { state in
                state.open[key] = nil
                state.dead.remove(key)
            }
        }
        // A silent or dropping cut holds a new connection before it reaches upstream; one its client gave up on ends here.
        let closing = Closing()
        closing.watch(connection.channel)
        guard (try? await passSilentCut(state, watching: closing)) != nil, !closing.closed else {
            try? await connection.channel.close()
            return
        }
        let server: NIOAsyncChannel<ByteBuffer, ByteBuffer>
        do {
            server = try await ClientBootstrap(group: connection.channel.eventLoop)
                .connectTimeout(.seconds(2))
                .channelOption(.socketOption(.tcp_nodelay), value: 1)
                .connect(host: upstream.host, port: upstream.port) { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try NIOAsyncChannel<ByteBuffer, ByteBuffer>(wrappingChannelSynchronously: channel)
                    }
                }
        } catch {
            // The upstream itself is down (Redis restarting): the client sees its connection close.
            try? await connection.channel.close()
            return
        }
        let both = state.withLock { state in
            guard state.cut != .reset, state.open[key] != nil else { return false }
            state.open[key] = [connection.channel, server.channel]
            return true
        }
        guard both else {
            try? await connection.channel.close()
            try? await server.channel.close()
            return
        }
        closing.watch(server.channel)
        try? await connection.executeThenClose { clientInbound, clientOutbound in
            try await server.executeThenClose { serverInbound, serverOutbound in
                // Either direction ending (a side closed, the relay was cut) ends both.
                try await withThrowingTaskGroup(of: Void.self) { group in
                    group.addTask {
                        for try await bytes in clientInbound {
                            guard try await pass(key, state, watching: closing) else { continue }
                            try await serverOutbound.write(bytes)
                        }
                    }
                    group.addTask {
                        for try await bytes in serverInbound {
                            guard try await pass(key, state, watching: closing) else { continue }
                            try await clientOutbound.write(bytes)
                        }
                    }
                    _ = try await group.next()
                    group.cancelAll()
                }
            }
        }
    }
}

/// The relay could not start.
public struct TCPRelayError: Error, CustomStringConvertible {
    public let description: String
    init(_ description: String) { self.description = description }
}
