import NIOCore

/// Commands written on one connection, answered in the order they were sent.
struct RedisRequest: Sendable {
    /// One or more commands, RESP-encoded back to back.
    var bytes: ByteBuffer
    /// How many replies answer `bytes`: one per command.
    var replyCount: Int
    var promise: EventLoopPromise<[RedisValue]>
}

/// Asks the handler to fail what is waiting with `error` and close: `shutDown` when the client stops.
struct CloseConnection: Sendable {
    var error: RedisError
}

/// Matches each reply with the request waiting for it, on the connection's event loop.
///
/// Many callers share a connection: Redis answers commands in the order they arrive, so the
/// first waiting request takes the next replies. A reply that no request waits for is pushed
/// (a subscribed connection's messages) and goes to `pushed`. On such a connection a published
/// message (`message` or `pmessage`) goes to `pushed` even while a command waits: Redis may send
/// one between a command (the subscription's `PING`) and its reply, and it is no reply.
///
/// When requests wait and Redis has sent nothing for the command timeout (no byte since the
/// oldest of them was written, or since the last bytes read), every waiting request fails with
/// ``RedisError/timeout(endpoint:after:)`` and the connection is closed: a reply arriving late
/// would otherwise be taken for the next request's. The pool then opens a new one. Silence, not
/// the whole reply's time, is what counts, as with a socket timeout: a large pipeline queued
/// behind others on a busy connection is not failed while its replies are still coming in.
final class RedisCommandHandler: ChannelDuplexHandler {
    typealias InboundIn = RedisValue
    typealias OutboundIn = RedisRequest
    typealias OutboundOut = ByteBuffer

    private struct Waiting {
        var replyCount: Int
        var promise: EventLoopPromise<[RedisValue]>
        var written: NIODeadline
    }

    private let endpoint: String
    private let commandTimeout: Duration
    private let pushed: (@Sendable (RedisValue) -> Void)?
    private var waiting = CircularBuffer<Waiting>()
    /// The replies so far of the oldest waiting request. Kept out of `waiting`: appending through
    /// the buffer's subscript copied the array every time, which made a pipeline of 30,000 commands
    /// hold its event loop for seconds.
    private var headReplies: [RedisValue] = []
    /// Set once the connection failed or closed; later requests fail with it at once.
    private var failure: RedisError?
    /// Armed while anything waits; it fires when Redis may have been silent for the timeout.
    private var watchdog: Scheduled<Void>?
    /// When bytes last arrived.
    private var lastRead = NIODeadline.uptimeNanoseconds(0)
    private var timeout: TimeAmount { TimeAmount(commandTimeout) }

    init(endpoint: String, commandTimeout: Duration, pushed: (@Sendable (RedisValue) -> Void)?) {
        self.endpoint = endpoint
        self.commandTimeout = commandTimeout
        self.pushed = pushed
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        let request = unwrapOutboundIn(data)
        if let failure {
            request.promise.fail(failure)
            promise?.fail(failure)
            return
        }
        waiting.append(Waiting(replyCount: request.replyCount, promise: request.promise, written: context.eventLoop.now))
        context.write(wrapOutboundOut(request.bytes), promise: promise)
        armWatchdog(context: context)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let reply = unwrapInboundIn(data)
        if let pushed, Self.isPublished(reply) {
            pushed(reply)
            return
        }
        guard !waiting.isEmpty else {
            if let pushed {
                pushed(reply)
            } else {
                fail(.protocolError("Redis sent a reply nobody asked for: \(reply)"), context: context)
            }
            return
        }
        headReplies.append(reply)
        if headReplies.count == waiting[waiting.startIndex].replyCount {
            let done = waiting.removeFirst()
            let replies = headReplies
            headReplies = []
            done.promise.succeed(replies)
        }
    }

    /// A message published on a channel the connection follows: `["message", channel, payload]`
    /// or `["pmessage", pattern, channel, payload]`.
    static func isPublished(_ reply: RedisValue) -> Bool {
        guard case .array(let parts) = reply, let kind = parts.first?.stringValue else { return false }
        return (kind == "message" && parts.count == 3) || (kind == "pmessage" && parts.count == 4)
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        lastRead = context.eventLoop.now
        context.fireChannelReadComplete()
    }

    func triggerUserOutboundEvent(context: ChannelHandlerContext, event: Any, promise: EventLoopPromise<Void>?) {
        if let close = event as? CloseConnection {
            fail(close.error, context: context)
            promise?.succeed()
        } else {
            context.triggerUserOutboundEvent(event, promise: promise)
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        failWaiting(.connectionLost(endpoint: endpoint, reason: "the connection was closed"))
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if let error = error as? RedisError {
            fail(error, context: context)
        } else {
            fail(.connectionLost(endpoint: endpoint, reason: "\(error)"), context: context)
        }
    }

    /// When the connection times out unless bytes arrive before: the timeout after the oldest
    /// waiting request was written or the last bytes were read, whichever came later.
    private var deadline: NIODeadline? {
        waiting.first.map { max($0.written, lastRead) + timeout }
    }

    private func armWatchdog(context: ChannelHandlerContext, lastLook: Bool = false) {
        guard watchdog == nil, let deadline else { return }
        watchdog = context.eventLoop.assumeIsolated().scheduleTask(deadline: lastLook ? context.eventLoop.now + .milliseconds(1) : deadline) {
            self.watchdog = nil
            guard let deadline = self.deadline else { return }
            if deadline > context.eventLoop.now {
                self.armWatchdog(context: context)
            } else if !lastLook {
                // A busy event loop runs due timers before it reads the sockets that became
                // readable meanwhile: one more turn of the loop reads a reply already there.
                self.armWatchdog(context: context, lastLook: true)
            } else {
                self.fail(.timeout(endpoint: self.endpoint, after: self.commandTimeout), context: context)
            }
        }
    }

    /// Fails everything waiting and closes the connection; the first failure is the one kept.
    private func fail(_ error: RedisError, context: ChannelHandlerContext) {
        if failure == nil { failure = error }
        // Closed before the callers learn of it, so that none of them finds it still open and tries it again.
        context.close(promise: nil)
        failWaiting(error)
    }

    private func failWaiting(_ error: RedisError) {
        if failure == nil { failure = error }
        watchdog?.cancel()
        watchdog = nil
        let failed = waiting
        waiting.removeAll()
        headReplies = []
        for request in failed { request.promise.fail(failure ?? error) }
    }
}

extension TimeAmount {
    init(_ duration: Duration) {
        let (seconds, attoseconds) = duration.components
        self = .nanoseconds(seconds * 1_000_000_000 + attoseconds / 1_000_000_000)
    }
}
