import NIOCore
import NIOHTTPTypes

/// Sees each request's decoded parts: it closes a connection whose request body does not
/// arrive within the body timeout (slow-body attacks), and tells `ConnectionGuard` when a
/// request starts and when a response has been written, so the idle timeout starts again
/// only when no request is under way (one pipelined behind another included).
final class RequestProgressHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    private let bodyTimeout: Duration
    private var deadline: Scheduled<Void>?

    init(bodyTimeout: Duration) {
        self.bodyTimeout = bodyTimeout
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head:
            context.triggerUserOutboundEvent(RequestStarted(), promise: nil)
            deadline?.cancel()
            let loop = context.eventLoop.assumeIsolated()
            deadline = loop.scheduleTask(in: .nanoseconds(bodyTimeout.nanoseconds)) {
                context.close(promise: nil)
            }
        case .end:
            deadline?.cancel()
            deadline = nil
        case .body:
            break
        }
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        guard case .end = unwrapOutboundIn(data) else {
            context.write(data, promise: promise)
            return
        }
        let written = context.eventLoop.makePromise(of: Void.self)
        written.futureResult.cascade(to: promise)
        context.write(data, promise: written)
        written.futureResult.assumeIsolated().whenSuccess {
            context.triggerUserOutboundEvent(ResponseCompleted(), promise: nil)
        }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        deadline?.cancel()
        deadline = nil
    }
}
