import Logging
import NIOCore
import NIOPosix
import Synchronization

/// Redis channels followed on a connection of their own: a subscribed connection takes no
/// other command, so one connection serves every channel an instance follows.
///
/// The connection is opened anew after any failure (Redis restarted, the network
/// dropped), `retryDelay` after the last try. Messages published while it was down
/// are lost, so the follower is told each time the subscription starts (again) and
/// can look up what it may have missed.
///
/// A subscribed connection only reads, and a connection that only reads never learns that its
/// path died without a reset (a NAT's or load balancer's entry dropped, Redis moved to another
/// host, packets dropped): it would wait for messages for good. So the connection sends `PING`
/// every `pingInterval`, and Redis's silence for the command timeout after it
/// (`RedisConfiguration.commandTimeout`) ends the connection like any failure.
public struct RedisSubscription: Sendable {
    public let configuration: RedisConfiguration
    public let channels: [String]
    /// Between a lost or refused connection and the next try.
    public var retryDelay: Duration = .seconds(1)
    /// Between two `PING`s on the subscribed connection: a dead path is noticed at most this
    /// plus the command timeout after it died.
    public var pingInterval: Duration = .seconds(1)
    let logger: Logger

    public init(configuration: RedisConfiguration, channels: [String], logger: Logger) {
        precondition(!channels.isEmpty, "a subscription needs a channel")
        self.configuration = configuration
        self.channels = channels
        self.logger = logger
    }

    /// Follows the channels until the calling task is cancelled.
    /// - Parameters:
    ///   - eventLoopGroup: where the connection lives; the process's shared one unless given.
    ///   - subscribed: called after every (re)subscription.
    ///   - lost: called when a subscription ends by a failure (messages are lost until the next `subscribed`).
    ///   - message: called with each message's channel and payload, in order, on the connection's event loop.
    public func run(
        eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        subscribed: @escaping @Sendable () -> Void, lost: @escaping @Sendable () -> Void = {},
        message: @escaping @Sendable (_ channel: String, _ payload: ByteBuffer) -> Void
    ) async {
        var failing = false
        while !Task.isCancelled {
            do {
                try await follow(eventLoopGroup: eventLoopGroup, subscribed: { failing = false; subscribed() }, message: message)
                // Cancelled: the connection was closed on purpose.
                if Task.isCancelled { break }
                throw RedisError.connectionLost(endpoint: configuration.endpoint, reason: "the connection was closed")
            } catch {
                lost()
                // Only the change is logged: a Redis that stays down would fill the log.
                if !failing { logger.warning("the Redis subscription failed; retrying", metadata: ["channels": "\(channels)", "error": "\(error)"]) }
                failing = true
            }
            guard !Task.isCancelled else { break }
            try? await Task.sleep(for: retryDelay)
        }
    }

    /// One connection's life: it returns when the connection closes (cancelled or failed), and throws if it could not subscribe.
    private func follow(
        eventLoopGroup: any EventLoopGroup, subscribed: () -> Void, message: @escaping @Sendable (String, ByteBuffer) -> Void
    ) async throws {
        let connection = try await RedisConnection.connect(configuration: configuration, eventLoopGroup: eventLoopGroup) { pushed in
            // ["message", channel, payload]; anything else (a ping reply, the other channels'
            // subscribe confirmations) is not for the follower.
            if case .array(let parts) = pushed, parts.count == 3, parts[0].stringValue == "message",
                let channel = parts[1].stringValue, let payload = parts[2].bufferValue
            {
                message(channel, payload)
            }
        }
        try await withTaskCancellationHandler {
            // Redis subscribes to all of them before it confirms the first, so once that
            // confirmation is here no message on any of them can be missed.
            let reply = try await connection.execute([ByteBuffer(string: "SUBSCRIBE")] + channels.map { ByteBuffer(string: $0) })
            guard case .array(let parts) = reply, parts.first?.stringValue == "subscribe" else {
                connection.close()
                throw RedisError.unexpectedReply(expected: "a subscribe confirmation", got: reply)
            }
            logger.debug("subscribed", metadata: ["channels": "\(channels)"])
            subscribed()
            // The unanswered PING's error, if that is what ended the connection.
            let failure = await withTaskGroup(of: RedisError?.self) { group in
                group.addTask { [pingInterval] in
                    while !Task.isCancelled {
                        try? await Task.sleep(for: pingInterval)
                        guard !Task.isCancelled else { return nil }
                        do throws(RedisError) {
                            // Redis answers ["pong", ""] in subscribed mode; any answer will do.
                            _ = try await connection.execute([ByteBuffer(string: "PING")])
                        } catch {
                            // The handler closed the connection on its timeout; closing it again is harmless.
                            connection.close()
                            return error
                        }
                    }
                    return nil
                }
                await connection.closed()
                group.cancelAll()
                return await group.reduce(nil) { $0 ?? $1 }
            }
            if let failure, !Task.isCancelled { throw failure }
        } onCancel: {
            connection.close()
        }
    }
}
