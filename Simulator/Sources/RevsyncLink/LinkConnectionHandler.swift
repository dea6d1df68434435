import Logging
import NIOCore
import NIOHTTP1
import NIOPosix

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The device side of one proxied connection. It gathers each request whole,
/// asks the link for its fate, and relays it over its own upstream connection
/// (opened lazily, reopened if the server closes it), so faults fall exactly
/// on request and response boundaries. Everything runs on the device
/// connection's event loop; the upstream connection shares that loop.
///
/// The link keeps no timeout of its own on an answer: a request the server holds
/// (a long-poll) waits as long as the server holds it, and its answer then meets
/// the drawn fate (a stall, a reset, the bandwidth) like any other. Going offline
/// resets it; a device that gives up closes its connection, and the link closes
/// the upstream one, so the server sees the disconnect.
final class LinkConnectionHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    /// A request in flight between the device and the server.
    private struct Exchange {
        var head: HTTPRequestHead
        var body: ByteBuffer
        var decision: FateDecision
        var keepAlive: Bool
        /// Copies sent upstream so far (a duplicate sends two).
        var sent = 0
        /// The answer to the first copy of a duplicated request.
        var firstAnswer: UpstreamResponse?
        /// A split request's answers so far, in the order they came.
        var splitAnswers: [UpstreamResponse] = []
        /// Whether a split request's copy (to the other instance) may still answer.
        var copyPending = false
    }

    private let state: LinkState
    private let targets: LinkTargets
    private let logger: Logger
    private var context: ChannelHandlerContext?
    private var requestHead: HTTPRequestHead?
    private var requestBody = ByteBuffer()
    private var exchange: Exchange?
    private var upstream: (any Channel)?
    /// A split request's connection to the other instance, one request long.
    private var copy: (any Channel)?
    private var isClosed = false

    init(state: LinkState, targets: LinkTargets, logger: Logger) {
        self.state = state
        self.targets = targets
        self.logger = logger
    }

    private var profile: LinkProfile { self.state.profile }

    // MARK: Device side

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    func channelActive(context: ChannelHandlerContext) {
        guard self.state.admit(context.channel) else {
            self.logger.debug("link offline, connection refused")
            self.isClosed = true
            resetConnection(context.channel)
            return
        }
        context.fireChannelActive()
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.isClosed = true
        self.state.forget(context.channel)
        self.exchange = nil
        self.upstream?.close(promise: nil)
        self.upstream = nil
        self.closeCopy()
        context.fireChannelInactive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch self.unwrapInboundIn(data) {
        case .head(let head):
            self.requestHead = head
            self.requestBody.clear()
        case .body(var chunk):
            self.requestBody.writeBuffer(&chunk)
        case .end:
            guard let head = self.requestHead else { return }
            self.requestHead = nil
            self.begin(head: head, body: self.requestBody, context: context)
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }

    private func begin(head: HTTPRequestHead, body: ByteBuffer, context: ChannelHandlerContext) {
        // Only a POST is split: a download's ranges must all come from one instance's file.
        guard let decision = self.state.decide(splittable: head.method == .POST) else {
            self.isClosed = true
            resetConnection(context.channel)
            return
        }
        self.logger.debug("request fate", metadata: ["fate": "\(decision.fate.rawValue)", "uri": "\(head.uri)"])
        if decision.fate == .refuse {
            self.isClosed = true
            resetConnection(context.channel)
            return
        }
        var upstreamHead = head
        upstreamHead.headers.remove(name: "transfer-encoding")
        if body.readableBytes > 0 || head.headers.contains(name: "content-length") {
            upstreamHead.headers.replaceOrAdd(name: "content-length", value: String(body.readableBytes))
        }
        self.exchange = Exchange(head: upstreamHead, body: body, decision: decision, keepAlive: head.isKeepAlive)
        let delay = decision.upstreamDelay + self.profile.transferDelay(bytes: body.readableBytes)
        context.eventLoop.assumeIsolated().scheduleTask(in: delay) {
            self.sendUpstream()
        }
    }

    // MARK: Server side

    private func sendUpstream() {
        guard !self.isClosed, self.exchange != nil else { return }
        self.withUpstream { channel in
            guard var exchange = self.exchange else { return }
            exchange.sent += 1
            self.exchange = exchange
            if exchange.decision.fate == .resetMidRequest {
                // The server sees the full Content-Length but only part of the
                // body, then the connection ends: a request cut in flight.
                let cutBytes = Int(Double(exchange.body.readableBytes) * exchange.decision.cut)
                var written = channel.writeAndFlush(HTTPClientRequestPart.head(exchange.head))
                if let part = exchange.body.getSlice(at: exchange.body.readerIndex, length: cutBytes), cutBytes > 0 {
                    written = channel.writeAndFlush(HTTPClientRequestPart.body(.byteBuffer(part)))
                }
                // Close once the bytes are out, so the server really receives the partial request.
                written.hop(to: channel.eventLoop).assumeIsolated().whenComplete { _ in
                    self.closeBothSides()
                }
                return
            }
            Self.send(exchange, on: channel)
            if exchange.decision.fate == .split && exchange.sent == 1 { self.sendCopy() }
        }
    }

    /// Writes the whole request of `exchange` to a server.
    private static func send(_ exchange: Exchange, on channel: any Channel) {
        channel.write(HTTPClientRequestPart.head(exchange.head), promise: nil)
        if exchange.body.readableBytes > 0 {
            channel.write(HTTPClientRequestPart.body(.byteBuffer(exchange.body)), promise: nil)
        }
        channel.writeAndFlush(HTTPClientRequestPart.end(nil), promise: nil)
    }

    /// Sends a split request's copy to the other instance, on a connection of its own.
    private func sendCopy() {
        guard let port = self.targets.splitPort, let context = self.context, var exchange = self.exchange else { return }
        exchange.copyPending = true
        self.exchange = exchange
        self.connect(port: port, isCopy: true, context: context)
            .whenComplete { result in
                guard case .success(let channel) = result, !self.isClosed, let exchange = self.exchange else {
                    if case .success(let channel) = result { channel.close(promise: nil) }
                    self.copyEnded()
                    return
                }
                self.copy = channel
                Self.send(exchange, on: channel)
            }
    }

    /// The copy's connection ended, answered or not.
    func copyClosed(_ channel: any Channel) {
        guard let copy = self.copy, copy === channel else { return }
        self.copy = nil
        self.copyEnded()
    }

    /// A connection to a server on `port`, whose answers come back to this handler, on its loop.
    private func connect(port: Int, isCopy: Bool, context: ChannelHandlerContext) -> EventLoopFuture<any Channel>.Isolated {
        let loop = context.eventLoop
        let bound = NIOLoopBound(self, eventLoop: loop)
        return ClientBootstrap(group: loop)
            .connectTimeout(.seconds(2))
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHTTPClientHandlers()
                    try channel.pipeline.syncOperations.addHandler(UpstreamHandler(owner: bound.value, isCopy: isCopy))
                }
            }
            .connect(host: self.targets.host, port: port)
            .hop(to: loop)
            .assumeIsolated()
    }

    /// Closes the copy's connection as done with: forgotten first, since closing it calls `copyClosed` at once.
    private func closeCopy() {
        let copy = self.copy
        self.copy = nil
        copy?.close(promise: nil)
    }

    /// The copy will not answer (any more): a split request whose own answer came goes out with it.
    private func copyEnded() {
        guard var exchange = self.exchange, exchange.copyPending else { return }
        exchange.copyPending = false
        self.exchange = exchange
        if let only = exchange.splitAnswers.last { self.deliver(only, exchange: exchange, cut: nil) }
    }

    /// A split request's answer from either server: the device gets the last of the two.
    private func splitAnswered(_ response: UpstreamResponse, fromCopy: Bool, exchange: Exchange) {
        var exchange = exchange
        exchange.splitAnswers.append(response)
        if fromCopy { exchange.copyPending = false }
        self.exchange = exchange
        if fromCopy { self.closeCopy() }
        let primaryAnswered = exchange.splitAnswers.count == 2 || !fromCopy
        guard primaryAnswered, !exchange.copyPending else { return }
        if exchange.splitAnswers.count == 2 {
            self.targets.onSplit?(SplitExchange(
                requestHeaders: exchange.head.headers, requestBody: exchange.body,
                answers: exchange.splitAnswers.map { .init(status: Int($0.head.status.code), headers: $0.head.headers, body: $0.body) }))
        }
        self.deliver(response, exchange: exchange, cut: nil)
    }

    /// Runs `body` with a live upstream connection, connecting first if needed;
    /// if the server cannot be reached the device's connection is closed.
    private func withUpstream(_ body: @escaping (any Channel) -> Void) {
        if let upstream = self.upstream, upstream.isActive {
            body(upstream)
            return
        }
        guard let context = self.context else { return }
        self.connect(port: self.targets.port, isCopy: false, context: context)
            .whenComplete { result in
                switch result {
                case .success(let channel):
                    if self.isClosed {
                        channel.close(promise: nil)
                        return
                    }
                    self.upstream = channel
                    body(channel)
                case .failure(let error):
                    self.logger.debug("server unreachable", metadata: ["error": "\(error)"])
                    self.closeDevice()
                }
            }
    }

    func upstreamClosed(_ channel: any Channel) {
        guard let upstream = self.upstream, upstream === channel else { return }
        self.upstream = nil
        // The server went away while the device waits for an answer.
        if self.exchange != nil { self.closeDevice() }
    }

    func upstreamAnswered(_ response: UpstreamResponse, fromCopy: Bool = false) {
        guard var exchange = self.exchange, !self.isClosed else { return }
        switch exchange.decision.fate {
        case .split:
            self.splitAnswered(response, fromCopy: fromCopy, exchange: exchange)
        case .duplicate where exchange.sent == 1:
            // The copy goes over the same keep-alive connection; if the server
            // closed it after answering, the copy is lost with it and the
            // device's connection closes (rare: our servers keep connections alive).
            exchange.firstAnswer = response
            self.exchange = exchange
            self.sendUpstream()
        case .duplicate:
            self.deliver(exchange.firstAnswer ?? response, exchange: exchange, cut: nil)
        case .pass:
            self.deliver(response, exchange: exchange, cut: nil)
        case .resetMidResponse:
            self.deliver(response, exchange: exchange, cut: exchange.decision.cut)
        case .stall:
            self.exchange = nil
            self.context?.eventLoop.assumeIsolated().scheduleTask(in: TimeAmount(self.profile.stallDuration)) {
                self.closeDevice()
            }
        case .dropAfterCommit:
            self.exchange = nil
            self.closeDevice()
        case .refuse, .resetMidRequest:
            // Never reach the server's answer; kept for exhaustiveness.
            self.exchange = nil
            self.closeDevice()
        }
    }

    /// Sends `response` to the device after the downstream delay; with `cut`,
    /// only that fraction of the body goes out before the connection closes.
    private func deliver(_ response: UpstreamResponse, exchange: Exchange, cut: Double?) {
        self.exchange = nil
        guard let context = self.context else { return }
        // A body larger than one pacing chunk trickles out at the bandwidth, as over a slow
        // network, instead of arriving whole after a long silence a device would time out on.
        let rate = self.profile.bandwidth ?? 0
        let paced = cut == nil && rate > 0 && response.body.readableBytes > Self.pacingChunk(rate)
        let delay = exchange.decision.downstreamDelay + (paced ? .zero : self.profile.transferDelay(bytes: response.body.readableBytes))
        var head = response.head
        let bodyless =
            exchange.head.method == .HEAD || head.status == .noContent || head.status == .notModified
            || head.status.code < 200
        if !bodyless {
            head.headers.remove(name: "transfer-encoding")
            head.headers.replaceOrAdd(name: "content-length", value: String(response.body.readableBytes))
        }
        let keepAlive = exchange.keepAlive && response.head.isKeepAlive
        context.eventLoop.assumeIsolated().scheduleTask(in: delay) {
            guard !self.isClosed else { return }
            if let cut {
                self.writeTruncated(head: head, body: response.body, cut: cut, context: context)
                return
            }
            context.write(self.wrapOutboundOut(.head(head)), promise: nil)
            if paced {
                self.writePaced(response.body, bytesPerSecond: rate, keepAlive: keepAlive, context: context)
                return
            }
            if response.body.readableBytes > 0 {
                context.write(self.wrapOutboundOut(.body(.byteBuffer(response.body))), promise: nil)
            }
            let written = context.writeAndFlush(self.wrapOutboundOut(.end(nil)))
            if !keepAlive {
                written.assumeIsolated().whenComplete { _ in self.closeDevice() }
            }
        }
    }

    /// Bytes sent at once when pacing: a tenth of a second's worth, at least 1 KiB.
    static func pacingChunk(_ bytesPerSecond: Int) -> Int { max(1024, bytesPerSecond / 10) }

    /// Writes `body` a chunk at a time, each once its transfer time has passed, then ends the response.
    private func writePaced(_ body: ByteBuffer, bytesPerSecond: Int, keepAlive: Bool, context: ChannelHandlerContext) {
        var rest = body
        let part = rest.readSlice(length: min(Self.pacingChunk(bytesPerSecond), rest.readableBytes)) ?? ByteBuffer()
        let pause = TimeAmount.nanoseconds(Int64(Double(part.readableBytes) / Double(bytesPerSecond) * 1_000_000_000))
        context.eventLoop.assumeIsolated().scheduleTask(in: pause) {
            guard !self.isClosed else { return }
            context.writeAndFlush(self.wrapOutboundOut(.body(.byteBuffer(part))), promise: nil)
            guard rest.readableBytes == 0 else {
                self.writePaced(rest, bytesPerSecond: bytesPerSecond, keepAlive: keepAlive, context: context)
                return
            }
            let written = context.writeAndFlush(self.wrapOutboundOut(.end(nil)))
            if !keepAlive {
                written.assumeIsolated().whenComplete { _ in self.closeDevice() }
            }
        }
    }

    /// A response cut in flight: the head and part of the body, then the end
    /// of the connection. An empty body has nothing to cut into, so the device
    /// then gets nothing at all before the close.
    private func writeTruncated(head: HTTPResponseHead, body: ByteBuffer, cut: Double, context: ChannelHandlerContext) {
        let cutBytes = Int(Double(body.readableBytes) * cut)
        guard body.readableBytes > 0 else {
            self.closeDevice()
            return
        }
        var written = context.writeAndFlush(self.wrapOutboundOut(.head(head)))
        if let part = body.getSlice(at: body.readerIndex, length: cutBytes), cutBytes > 0 {
            written = context.writeAndFlush(self.wrapOutboundOut(.body(.byteBuffer(part))))
        }
        // Close once the bytes are out, so the device really receives the partial answer.
        written.assumeIsolated().whenComplete { _ in
            self.closeDevice()
        }
    }

    private func closeDevice() {
        guard !self.isClosed else { return }
        self.isClosed = true
        self.exchange = nil
        self.context?.close(promise: nil)
    }

    private func closeBothSides() {
        self.upstream?.close(promise: nil)
        self.upstream = nil
        self.closeCopy()
        self.closeDevice()
    }
}

/// Closes `channel` with a TCP reset rather than a clean shutdown, which is
/// what a device sees from a refused or dropped link.
func resetConnection(_ channel: any Channel) {
    guard let provider = channel as? any SocketOptionProvider else {
        channel.close(promise: nil)
        return
    }
    provider.setSoLinger(linger(l_onoff: 1, l_linger: 0)).whenComplete { _ in
        channel.close(promise: nil)
    }
}
