import Logging
import NIOCore
import NIOPosix
import Synchronization

/// One Redis channel followed on a connection and a thread of its own: a subscribed
/// connection takes no other command, and hiredis blocks.
///
/// The connection is opened anew after any failure (Redis restarted, the network
/// dropped), `retryDelay` after the last try. Messages published while it was down
/// are lost, so the follower is told each time the subscription starts (again) and
/// can look up what it may have missed.
public struct RedisSubscription: Sendable {
    public let configuration: RedisConfiguration
    public let channel: String
    /// Between a lost or refused connection and the next try.
    public var retryDelay: Duration = .seconds(1)
    let logger: Logger

    public init(configuration: RedisConfiguration, channel: String, logger: Logger) {
        self.configuration = configuration
        self.channel = channel
        self.logger = logger
    }

    /// Follows the channel until the calling task is cancelled.
    /// - Parameters:
    ///   - subscribed: called after every (re)subscription, on the subscription's thread.
    ///   - lost: called when a subscription ends by a failure (messages are lost until the next `subscribed`).
    ///   - message: called with each message's payload, in order, on the subscription's thread.
    public func run(
        subscribed: @escaping @Sendable () -> Void, lost: @escaping @Sendable () -> Void = {},
        message: @escaping @Sendable (ByteBuffer) -> Void
    ) async {
        let thread = NIOThreadPool(numberOfThreads: 1)
        thread.start()
        let stop = StopFlag()
        await withTaskCancellationHandler {
            var failing = false
            while !Task.isCancelled {
                do {
                    try await thread.runIfActive { [self] () throws -> Void in
                        try follow(stop: stop, subscribed: subscribed, message: message)
                    }
                } catch {
                    lost()
                    // Only the change is logged: a Redis that stays down would fill the log.
                    if stop.subscribed.exchange(false, ordering: .relaxed) { failing = false }
                    if !failing { logger.warning("the Redis subscription failed; retrying", metadata: ["channel": "\(channel)", "error": "\(error)"]) }
                    failing = true
                }
                guard !Task.isCancelled else { break }
                try? await Task.sleep(for: retryDelay)
            }
        } onCancel: {
            stop.value.store(true, ordering: .relaxed)
        }
        try? await thread.shutdownGracefully()
    }

    /// One connection's life, on the subscription's thread: it ends when `stop` is set (returns)
    /// or the connection fails (throws). `stop` is looked at every quarter second.
    private func follow(stop: StopFlag, subscribed: () -> Void, message: (ByteBuffer) -> Void) throws {
        BrokenPipeSignal.blockOnCurrentThread()
        let connection = try RedisConnection(configuration: configuration)
        let reply = try connection.execute([ByteBuffer(string: "SUBSCRIBE"), ByteBuffer(string: channel)])
        guard case .array(let parts) = reply, parts.first?.stringValue == "subscribe" else {
            throw RedisError.unexpectedReply(expected: "a subscribe confirmation", got: reply)
        }
        logger.debug("subscribed", metadata: ["channel": "\(channel)"])
        stop.subscribed.store(true, ordering: .relaxed)
        subscribed()
        while !stop.value.load(ordering: .relaxed) {
            guard let pushed = try connection.nextPushed(within: .milliseconds(250)) else { continue }
            // ["message", channel, payload]; anything else (a ping reply, say) is not for the follower.
            if case .array(let parts) = pushed, parts.count == 3, parts[0].stringValue == "message", let payload = parts[2].bufferValue {
                message(payload)
            }
        }
    }
}

/// Shared by the following task and the subscription's thread: `value` is set from the
/// cancelling task; `subscribed` tells the task that the connection that failed had been
/// subscribed (a new outage, worth a log line).
private final class StopFlag: Sendable {
    let value = Atomic<Bool>(false)
    let subscribed = Atomic<Bool>(false)
}
