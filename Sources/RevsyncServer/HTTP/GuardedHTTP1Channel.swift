import Hummingbird
import HummingbirdCore
import Logging
import NIOCore

/// Hummingbird's HTTP/1 channel with `ConnectionGuard` in front of its decoder and
/// `RequestProgressHandler` behind it: the connection cap and the idle, header and body
/// timeouts, which Hummingbird's own channel does not have. Behind those, `ParkedSyncHandler`
/// holds a `/sync` request that waits for a commit, so that its task can end.
struct GuardedHTTP1Channel: ServerChildChannel, HTTPChannelHandler {
    typealias Value = HTTP1Channel.Value

    let base: HTTP1Channel
    let limits: ConnectionLimits
    let count: BoundedCount

    var responder: HTTPChannelHandler.Responder { base.responder }

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        let limits = self.limits, count = self.count
        return channel.eventLoop.makeCompletedFuture {
            try channel.pipeline.syncOperations.addHandler(ConnectionGuard(limits: limits, count: count))
        }.flatMap {
            base.setup(channel: channel, logger: logger)
        }
    }

    func handle(value: Value, logger: Logger) async {
        await base.handle(value: value, logger: logger)
    }

    /// The server builder for `Application(server:)`.
    static func builder(limits: ConnectionLimits, count: BoundedCount) -> HTTPServerBuilder {
        HTTPServerBuilder { responder in
            let bodyTimeout = limits.bodyTimeout
            let configuration = HTTP1Channel.Configuration(additionalChannelHandlers: [RequestProgressHandler(bodyTimeout: bodyTimeout), ParkedSyncHandler()])
            return GuardedHTTP1Channel(base: HTTP1Channel(responder: responder, configuration: configuration), limits: limits, count: count)
        }
    }
}
