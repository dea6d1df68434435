import Foundation
import HTTPTypes
import NIOCore
import NIOHTTPTypes
import Synchronization

/// Sent by the `/sync` route down its connection's pipeline for a request that waits for a
/// commit: the connection holds it, so that the request's task can end.
final class ParkSync: Sendable {
    let pending: PendingSync
    /// Called once when the request is over: with the answer's status, or nil when its client left first.
    let done: @Sendable (_ status: Int?) -> Void
    private let accepted = Atomic<Bool>(false)

    init(pending: PendingSync, done: @escaping @Sendable (_ status: Int?) -> Void) {
        self.pending = pending
        self.done = done
    }

    /// Whether a `ParkedSyncHandler` took the request; if not, the route awaits its answer itself.
    var isAccepted: Bool { accepted.load(ordering: .acquiring) }

    fileprivate func accept() { accepted.store(true, ordering: .releasing) }
}

/// Holds a waiting `/sync` request on its connection, without the task Hummingbird gives each
/// request (issue 12: about 18 KiB of frames and request state per waiter).
///
/// The route sends `ParkSync` and returns a response with the answer's headers and no body.
/// This handler swallows that response, keeps its head, and writes the real answer under it
/// when the wait ends (`PendingSync`'s delivery, on this channel's event loop). Meanwhile:
/// - responses to requests pipelined behind the waiting one, and a close of the output, wait
///   for its answer, so that answers keep their order;
/// - closing the connection (the server's graceful shutdown quiesces it) first answers the
///   waiting request with what there is;
/// - the client leaving ends the wait with no answer.
///
/// It sits behind `RequestProgressHandler`, which sees the answer's end as the response's end:
/// the idle timeout starts after the answer, not while the request waits.
final class ParkedSyncHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    private struct Parked {
        let park: ParkSync
        /// The head of the route's response, which the answer is written under.
        var head: HTTPResponse?
        /// The route's response has passed whole (swallowed).
        var routeResponseEnded = false
        /// The answer, when it came before the route's response had passed.
        var answer: Result<ByteBuffer, any Error>?
    }

    private var parked: Parked?
    /// Writes of later responses, held until the waiting request is answered.
    private var held: [(part: HTTPResponsePart, promise: EventLoopPromise<Void>?)] = []
    private var heldClose: (mode: CloseMode, promise: EventLoopPromise<Void>?)?
    private var context: ChannelHandlerContext?

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
    }

    func triggerUserOutboundEvent(context: ChannelHandlerContext, event: Any, promise: EventLoopPromise<Void>?) {
        guard let park = event as? ParkSync else {
            context.triggerUserOutboundEvent(event, promise: promise)
            return
        }
        // One request held at a time: one pipelined behind it is awaited by its own task.
        guard parked == nil, context.channel.isActive else {
            promise?.succeed()
            return
        }
        parked = Parked(park: park)
        park.accept()
        promise?.succeed()
        let loop = context.eventLoop
        let handler = NIOLoopBound(self, eventLoop: loop)
        park.pending.start { answer in
            loop.execute { handler.value.answered(answer, for: park) }
        }
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        guard var parked else {
            context.write(data, promise: promise)
            return
        }
        guard !parked.routeResponseEnded else {
            held.append((unwrapOutboundIn(data), promise))
            return
        }
        switch unwrapOutboundIn(data) {
        case .head(let head): parked.head = head
        case .body: break
        case .end: parked.routeResponseEnded = true
        }
        self.parked = parked
        promise?.succeed()
        if parked.routeResponseEnded, let answer = parked.answer { write(answer, context: context) }
    }

    func close(context: ChannelHandlerContext, mode: CloseMode, promise: EventLoopPromise<Void>?) {
        guard let parked, mode != .input else {
            context.close(mode: mode, promise: promise)
            return
        }
        if let earlier = heldClose {
            // The wider close wins; both callers hear when it is done.
            if let promise { earlier.promise?.futureResult.cascade(to: promise) }
            heldClose = (earlier.mode == .all ? .all : mode, earlier.promise ?? promise)
        } else {
            heldClose = (mode, promise)
        }
        // Closing the output (the route's task is done with the connection) waits for the
        // answer; closing the connection answers now.
        if mode == .all { parked.park.pending.release() }
    }

    func channelInactive(context: ChannelHandlerContext) {
        if let parked {
            self.parked = nil
            parked.park.pending.abandon()
            parked.park.done(nil)
        }
        let held = self.held
        self.held = []
        for write in held { write.promise?.fail(ChannelError.ioOnClosedChannel) }
        if let close = heldClose {
            heldClose = nil
            close.promise?.succeed()
        }
        context.fireChannelInactive()
    }

    private func answered(_ answer: Result<ByteBuffer, any Error>, for park: ParkSync) {
        guard var parked, parked.park === park, let context else { return }
        guard parked.routeResponseEnded else {
            parked.answer = answer
            self.parked = parked
            return
        }
        write(answer, context: context)
    }

    /// Writes the answer, then whatever waited behind it.
    private func write(_ answer: Result<ByteBuffer, any Error>, context: ChannelHandlerContext) {
        guard let parked else { return }
        self.parked = nil
        let head: HTTPResponse, body: ByteBuffer
        switch answer {
        case .success(let answer):
            head = Self.head(parked.head ?? HTTPResponse(status: .ok), length: answer.readableBytes)
            body = answer
        case .failure(let error):
            let error = SyncError(answering: error)
            let json: Data = (try? error.json) ?? Data(#"{"error":"internal"}"#.utf8)
            body = ByteBuffer(bytes: json)
            head = Self.head(HTTPResponse(status: error.status, headerFields: error.headers), length: body.readableBytes)
        }
        context.write(wrapOutboundOut(.head(head)), promise: nil)
        context.write(wrapOutboundOut(.body(body)), promise: nil)
        context.write(wrapOutboundOut(.end(nil)), promise: nil)
        parked.park.done(head.status.code)
        let held = self.held
        self.held = []
        for write in held { context.write(wrapOutboundOut(write.part), promise: write.promise) }
        context.flush()
        if let close = heldClose {
            heldClose = nil
            context.close(mode: close.mode, promise: close.promise)
        }
    }

    private static func head(_ head: HTTPResponse, length: Int) -> HTTPResponse {
        var head = head
        head.headerFields[.transferEncoding] = nil
        head.headerFields[.contentLength] = String(length)
        return head
    }
}
