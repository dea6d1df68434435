import NIOCore

/// The per-instance limits on connections and on how long a client may take.
public struct ConnectionLimits: Sendable {
    /// Concurrent connections; past it a new one is answered `503` and closed.
    public var maxConnections = 4096
    /// Time allowed with no request under way: after connecting, and after each response.
    public var idleTimeout: Duration = .seconds(60)
    /// Time from a request's first byte to the end of its head.
    public var headerTimeout: Duration = .seconds(10)
    /// Time from the end of a request's head to the end of its body.
    public var bodyTimeout: Duration = .seconds(60)

    public init() {}
}


/// Sent down the pipeline by `RequestProgressHandler` when a response has been written
/// whole, so `ConnectionGuard` starts waiting for the next request.
struct ResponseCompleted {}

/// Sent down the pipeline by `RequestProgressHandler` when a request's head has been
/// decoded: a request pipelined behind another (sent before its answer) came in while
/// `ConnectionGuard` was busy and unseen by it, and must not run under the idle timeout.
struct RequestStarted {}

/// The first handler of every connection, on raw bytes: it refuses connections past the
/// cap, and closes one whose client is idle too long or sends a request head too slowly
/// (slow-header attacks hold a socket open with a byte every few seconds).
///
/// A request's head ends at its first empty line (CRLF CRLF); from there the body's
/// deadline belongs to `RequestProgressHandler`, which sees the decoded parts.
final class ConnectionGuard: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private enum State {
        /// No request under way: waiting for the next one's first byte.
        case idle
        /// Reading a request head; `tail` holds its last bytes, to find CRLF CRLF across reads.
        case head(tail: [UInt8])
        /// The head is complete: the body, the handler and the response run.
        case busy
    }

    private let limits: ConnectionLimits
    private let count: BoundedCount
    private var counted = false
    private var state = State.idle
    /// Requests decoded and not yet answered whole: the connection is idle only at 0.
    private var underway = 0
    private var deadline: Scheduled<Void>?

    init(limits: ConnectionLimits, count: BoundedCount) {
        self.limits = limits
        self.count = count
    }

    func channelActive(context: ChannelHandlerContext) {
        guard count.enter(limit: limits.maxConnections) else {
            // The rest of the pipeline sees the connection open and close like any other.
            context.fireChannelActive()
            refuse(context)
            return
        }
        counted = true
        arm(context, limits.idleTimeout)
        context.fireChannelActive()
    }

    func channelInactive(context: ChannelHandlerContext) {
        disarm()
        if counted {
            counted = false
            count.leave()
        }
        context.fireChannelInactive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard counted else { return }
        let bytes = unwrapInboundIn(data)
        switch state {
        case .idle:
            state = .head(tail: [])
            arm(context, limits.headerTimeout)
            scanHead(bytes, tail: [], context)
        case .head(let tail):
            scanHead(bytes, tail: tail, context)
        case .busy:
            break
        }
        context.fireChannelRead(data)
    }

    /// A client that stops sending while its request is under way has gone (HTTP/1 clients do
    /// not half-close while they wait for an answer): the connection is closed, so that a request
    /// waiting for a commit ends instead of holding its place until its wait runs out.
    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case .busy = state, let event = event as? ChannelEvent, event == .inputClosed {
            context.close(promise: nil)
            return
        }
        context.fireUserInboundEventTriggered(event)
    }

    func triggerUserOutboundEvent(context: ChannelHandlerContext, event: Any, promise: EventLoopPromise<Void>?) {
        switch event {
        case is RequestStarted:
            promise?.succeed()
            underway += 1
            // Its head is complete, whatever this handler saw of it.
            state = .busy
            disarm()
        case is ResponseCompleted:
            promise?.succeed()
            underway = max(0, underway - 1)
            if case .busy = state, underway == 0 {
                state = .idle
                arm(context, limits.idleTimeout)
            }
        default:
            context.triggerUserOutboundEvent(event, promise: promise)
        }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        disarm()
    }

    /// Looks for the empty line that ends the head, in `bytes` after the previous read's `tail`.
    private func scanHead(_ bytes: ByteBuffer, tail: [UInt8], _ context: ChannelHandlerContext) {
        var window = tail
        for byte in bytes.readableBytesView {
            window.append(byte)
            if window.count > 4 { window.removeFirst(window.count - 4) }
            if window == [13, 10, 13, 10] {
                state = .busy
                disarm()
                return
            }
        }
        state = .head(tail: window)
    }

    private func arm(_ context: ChannelHandlerContext, _ timeout: Duration) {
        disarm()
        let loop = context.eventLoop.assumeIsolated()
        deadline = loop.scheduleTask(in: .nanoseconds(timeout.nanoseconds)) {
            context.close(promise: nil)
        }
    }

    private func disarm() {
        deadline?.cancel()
        deadline = nil
    }

    /// Answers a connection past the cap with the contract's `503` and closes it.
    private func refuse(_ context: ChannelHandlerContext) {
        let body = #"{"error":"unavailable","message":"the server has too many open connections: retry shortly"}"#
        let response = "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nretry-after: 1\r\n"
            + "connection: close\r\ncontent-length: \(body.utf8.count)\r\n\r\n" + body
        // On the channel's own loop, where the handler runs: the context need not cross threads.
        context.writeAndFlush(wrapOutboundOut(ByteBuffer(string: response))).assumeIsolated().whenComplete { _ in
            context.close(promise: nil)
        }
    }
}
