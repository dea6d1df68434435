import NIOCore
import NIOHTTP1
import NIOPosix

/// An answer as the bench's event loop saw it end.
struct PollAnswer: Sendable {
    let status: HTTPResponseStatus
    let body: ByteBuffer
    /// Taken on the event loop when the response's last part is decoded, before any Swift task
    /// runs: the figures are the server's and the wire's, not the bench's executor's.
    let received: ContinuousClock.Instant
}

/// One request handed to a connection's `ExchangeHandler`, and the promise its answer completes.
struct PollExchange: Sendable {
    let head: HTTPRequestHead
    let body: ByteBuffer
    let answer: EventLoopPromise<PollAnswer>
}

/// One device's own HTTP/1.1 keep-alive connection on a raw SwiftNIO channel, one request at a time.
///
/// Part of the push bench holds 10,000 of these open at once. A channel with the HTTP/1 codec
/// and one small handler costs a few kilobytes and no task; AsyncHTTPClient would add its pool's
/// per-connection state machines and a request object and task per waiting request, and its
/// answers would be seen when an awaiting task resumes among 10,000 others, not when they arrive.
struct PollConnection: Sendable {
    let channel: any Channel
    let port: Int
    let token: String

    static func connect(port: Int, token: String, group: any EventLoopGroup) async throws -> PollConnection {
        let channel = try await ClientBootstrap(group: group)
            .connectTimeout(.seconds(10))
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHTTPClientHandlers()
                    try channel.pipeline.syncOperations.addHandler(ExchangeHandler())
                }
            }
            .connect(host: "127.0.0.1", port: port).get()
        return PollConnection(channel: channel, port: port, token: token)
    }

    /// `POST /sync` with this device's token; the answer's future. Identity bodies only: no
    /// `Accept-Encoding`, so every answer can be read as it comes.
    func sync(_ body: String) -> EventLoopFuture<PollAnswer> {
        let bytes = ByteBuffer(string: body)
        let headers: HTTPHeaders = [
            "Host": "127.0.0.1:\(port)", "Authorization": "Bearer \(token)",
            "Content-Type": "application/json", "Content-Length": String(bytes.readableBytes),
        ]
        let promise = channel.eventLoop.makePromise(of: PollAnswer.self)
        let exchange = PollExchange(head: HTTPRequestHead(version: .http1_1, method: .POST, uri: "/sync", headers: headers), body: bytes, answer: promise)
        // A write that fails before it reaches the handler (the channel has closed) fails the answer;
        // a promise completed twice keeps its first result.
        channel.writeAndFlush(exchange).cascadeFailure(to: promise)
        return promise.futureResult
    }

    func close() async {
        try? await channel.close()
    }
}

/// Writes a `PollExchange` as one request and completes its promise with the answer.
final class ExchangeHandler: ChannelDuplexHandler {
    typealias InboundIn = HTTPClientResponsePart
    typealias OutboundIn = PollExchange
    typealias OutboundOut = HTTPClientRequestPart

    private var pending: EventLoopPromise<PollAnswer>?
    private var status: HTTPResponseStatus = .ok
    private var body: ByteBuffer?

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        let exchange = unwrapOutboundIn(data)
        guard pending == nil else {
            let error = BenchError("a second request on a connection whose answer has not arrived")
            exchange.answer.fail(error)
            promise?.fail(error)
            return
        }
        pending = exchange.answer
        context.write(wrapOutboundOut(.head(exchange.head)), promise: nil)
        context.write(wrapOutboundOut(.body(.byteBuffer(exchange.body))), promise: nil)
        context.write(wrapOutboundOut(.end(nil)), promise: promise)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            status = head.status
            body = nil
        case .body(var part):
            if var collected = body {
                body = nil  // so that `collected` is the buffer's only owner and grows in place
                collected.writeBuffer(&part)
                body = collected
            } else {
                body = part
            }
        case .end:
            let answer = PollAnswer(status: status, body: body ?? ByteBuffer(), received: .now)
            body = nil
            let promise = pending
            pending = nil
            promise?.succeed(answer)
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        failPending(BenchError("the server closed the connection before answering"))
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        failPending(error)
        context.close(promise: nil)
    }

    private func failPending(_ error: any Error) {
        let promise = pending
        pending = nil
        promise?.fail(error)
    }
}
