import NIOCore
import NIOPosix
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// One connection to Redis: a SwiftNIO channel that many callers share.
///
/// Nothing blocks a thread: a command is written on the channel's event loop and its reply
/// read there, and the caller's task resumes when the reply is whole. Calls made while
/// others wait are pipelined behind them (see ``RedisCommandHandler``). Once the connection
/// has failed or closed it stays dead: ``isUsable`` turns false and the pool opens another.
final class RedisConnection: Sendable {
    private let channel: any Channel
    private let endpoint: String
    /// Replies awaited (a pipeline's each count), counted from the caller's side so that the
    /// pool sees a call at once, before the event loop has written it.
    private let outstanding = Atomic<Int>(0)

    private init(channel: any Channel, endpoint: String) {
        self.channel = channel
        self.endpoint = endpoint
    }

    /// Connects and selects the database.
    /// - Parameter pushed: replies that no command waits for: the messages of a subscribed connection.
    static func connect(
        configuration: RedisConfiguration, eventLoopGroup: any EventLoopGroup,
        pushed: (@Sendable (RedisValue) -> Void)? = nil
    ) async throws(RedisError) -> RedisConnection {
        let endpoint = configuration.endpoint
        let bootstrap = ClientBootstrap(group: eventLoopGroup)
            .connectTimeout(TimeAmount(configuration.connectTimeout))
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandlers(
                        ByteToMessageHandler(RESPReplyDecoder()),
                        RedisCommandHandler(endpoint: endpoint, commandTimeout: configuration.commandTimeout, pushed: pushed))
                }
            }
        let channel: any Channel
        do {
            channel = try await bootstrap.connect(host: configuration.host, port: configuration.port).get()
        } catch {
            throw .connectionFailed(endpoint: endpoint, reason: Self.reason(error, connectTimeout: configuration.connectTimeout))
        }
        let connection = RedisConnection(channel: channel, endpoint: endpoint)
        if configuration.database != 0 {
            let reply: RedisValue
            do {
                reply = try await connection.execute([ByteBuffer(string: "SELECT"), ByteBuffer(string: String(configuration.database))])
            } catch {
                connection.close()
                throw .connectionFailed(endpoint: endpoint, reason: "SELECT \(configuration.database) failed: \(error)")
            }
            if case .error(let message) = reply {
                connection.close()
                throw .connectionFailed(endpoint: endpoint, reason: "SELECT \(configuration.database) failed: \(message)")
            }
        }
        return connection
    }

    /// Whether the connection can take commands: neither failed nor closed, by either side.
    var isUsable: Bool { channel.isActive }

    /// How many replies its callers wait for: 0 when a call made now is queued behind none.
    var awaitedReplies: Int { outstanding.load(ordering: .relaxed) }

    /// Sends one command and waits for its reply. An error reply is returned, not thrown.
    func execute(_ arguments: [ByteBuffer]) async throws(RedisError) -> RedisValue {
        try await reply(of: submit(arguments))
    }

    /// Sends one command; its reply, an error reply included, completes the future. Apart from
    /// `execute` so that a caller can await the future itself: one small frame on its task
    /// instead of a call's frames (a task keeps the deepest it ever needed for as long as it lives).
    func submit(_ arguments: [ByteBuffer]) -> EventLoopFuture<RedisValue> {
        var bytes = channel.allocator.buffer(capacity: arguments.reduce(16) { $0 + $1.readableBytes + 16 })
        do {
            try RESPCommandEncoder.encode(arguments, into: &bytes)
        } catch {
            return channel.eventLoop.makeFailedFuture(error)
        }
        return submit(bytes, replyCount: 1).flatMapThrowing { replies throws(RedisError) in
            guard let reply = replies.first, replies.count == 1 else { throw .protocolError("expected 1 reply, got \(replies.count)") }
            return reply
        }
    }

    /// What a `submit` promised (one reply or a pipeline's); every failure as a ``RedisError``.
    func reply<Value: Sendable>(of future: EventLoopFuture<Value>) async throws(RedisError) -> Value {
        do {
            return try await future.get()
        } catch let error as RedisError {
            throw error
        } catch {
            throw .connectionLost(endpoint: endpoint, reason: "\(error)")
        }
    }

    /// Sends all commands in one write and waits for one reply per command.
    /// Error replies are returned in place, not thrown.
    func execute(pipeline commands: [[ByteBuffer]]) async throws(RedisError) -> [RedisValue] {
        try await reply(of: submit(pipeline: commands))
    }

    /// Sends all commands in one write; the future completes with one reply per command.
    func submit(pipeline commands: [[ByteBuffer]]) throws(RedisError) -> EventLoopFuture<[RedisValue]> {
        guard !commands.isEmpty else { return channel.eventLoop.makeSucceededFuture([]) }
        return submit(try RESPCommandEncoder.encode(commands), replyCount: commands.count)
    }

    /// Fails what is waiting with `error` and closes the connection.
    func close(failingWith error: RedisError = .shutDown) {
        channel.triggerUserOutboundEvent(CloseConnection(error: error), promise: nil)
    }

    /// Resumes once the connection has closed, for whatever reason.
    func closed() async {
        try? await channel.closeFuture.get()
    }


    /// Writes `bytes`; the future completes with `replyCount` replies, or fails with a ``RedisError``.
    private func submit(_ bytes: ByteBuffer, replyCount: Int) -> EventLoopFuture<[RedisValue]> {
        let promise = channel.eventLoop.makePromise(of: [RedisValue].self)
        outstanding.add(replyCount, ordering: .relaxed)
        promise.futureResult.whenComplete { [self] _ in outstanding.subtract(replyCount, ordering: .relaxed) }
        // A write that never reaches the handler (the channel closed and took its handlers away)
        // must still fail its caller; when the handler has already answered, this does nothing.
        channel.writeAndFlush(RedisRequest(bytes: bytes, replyCount: replyCount, promise: promise)).whenFailure { [endpoint] error in
            promise.fail(error as? RedisError ?? .connectionLost(endpoint: endpoint, reason: "\(error)"))
        }
        return promise.futureResult
    }

    /// A connect failure in the words an operator would search for.
    private static func reason(_ error: any Error, connectTimeout: Duration) -> String {
        if let error = error as? ChannelError, case .connectTimeout = error {
            return "Connection timed out after \(connectTimeout)"
        }
        if let error = error as? NIOConnectionError {
            if error.dnsAAAAError != nil || error.dnsAError != nil, error.connectionErrors.isEmpty {
                return "cannot resolve host \(error.host)"
            }
            if let first = error.connectionErrors.first { return reason(first.error, connectTimeout: connectTimeout) }
        }
        if let error = error as? IOError { return String(cString: strerror(error.errnoCode)) + " (errno \(error.errnoCode))" }
        return "\(error)"
    }
}
