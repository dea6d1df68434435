import NIOCore
import NIOHTTP1

/// Collects the server's answers on the upstream connection and hands each
/// complete one to the device-side handler on the same event loop.
final class UpstreamHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPClientResponsePart

    /// Weak: the device side owns the upstream channel, not the reverse.
    private weak var owner: LinkConnectionHandler?
    /// The connection of a split request's copy, to the other instance.
    private let isCopy: Bool
    private var head: HTTPResponseHead?
    private var body: ByteBuffer?

    init(owner: LinkConnectionHandler, isCopy: Bool = false) {
        self.owner = owner
        self.isCopy = isCopy
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch self.unwrapInboundIn(data) {
        case .head(let head):
            self.head = head
            self.body = nil
        case .body(var chunk):
            if self.body == nil {
                self.body = chunk
            } else {
                self.body?.writeBuffer(&chunk)
            }
        case .end:
            guard let head = self.head else { return }
            let body = self.body ?? ByteBuffer()
            self.head = nil
            self.body = nil
            self.owner?.upstreamAnswered(UpstreamResponse(head: head, body: body), fromCopy: self.isCopy)
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        if self.isCopy {
            self.owner?.copyClosed(context.channel)
        } else {
            self.owner?.upstreamClosed(context.channel)
        }
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }
}

/// One whole answer from the server.
struct UpstreamResponse {
    var head: HTTPResponseHead
    var body: ByteBuffer
}
