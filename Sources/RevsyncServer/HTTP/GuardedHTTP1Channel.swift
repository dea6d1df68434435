import Hummingbird
import HummingbirdCore
import Logging
import NIOCore

/// Hummingbird's HTTP/1 channel with `ConnectionGuard` in front of its decoder and
/// `RequestProgressHandler` behind it: the connection cap and the idle, header and body
/// timeouts, which Hummingbird's own channel does not have. Behind those, `ParkedSyncHandler`
/// holds a `/sync` request that waits for a commit, so that its task can end. A `POST /sync`
/// request's responder runs on `RequestWorkers` rather than on the connection's task.
struct GuardedHTTP1Channel: ServerChildChannel, HTTPChannelHandler {
    typealias Value = HTTP1Channel.Value

    let base: HTTP1Channel
    let limits: ConnectionLimits
    let count: BoundedCount
    /// Where `POST /sync` requests run, apart from the connection's task; nil runs them on it.
    let workers: RequestWorkers?

    let responder: HTTPChannelHandler.Responder

    init(base: HTTP1Channel, limits: ConnectionLimits, count: BoundedCount, workers: RequestWorkers?) {
        self.base = base
        self.limits = limits
        self.count = count
        self.workers = workers
        responder = Self.responder(base.responder, workers: workers)
    }

    /// `base`, with `POST /sync` (the route of the connections that live longest: devices keep
    /// them open and wait on them) run on a worker: the application's responder, router,
    /// middleware, route and response write, whose frames a connection's task would keep for
    /// as long as it lives.
    private static func responder(_ base: @escaping HTTPChannelHandler.Responder, workers: RequestWorkers?) -> HTTPChannelHandler.Responder {
        guard let workers else { return base }
        return { request, writer, channel in
            guard request.method == .post, request.uri.path == "/sync" else {
                try await base(request, writer, channel)
                return
            }
            let handoff = WriterHandoff(writer)
            // On a worker, or here when none was free in time: either way the writer is taken once.
            try await workers.run {
                guard let writer = handoff.take() else { return }
                try await base(request, writer, channel)
            }
        }
    }

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        let limits = self.limits, count = self.count
        return channel.eventLoop.makeCompletedFuture {
            try channel.pipeline.syncOperations.addHandler(ConnectionGuard(limits: limits, count: count))
        }.flatMap {
            base.setup(channel: channel, logger: logger)
        }
    }

    func handle(value: Value, logger: Logger) async {
        // Hummingbird's connection loop, with this channel's responder.
        await handleHTTP(asyncChannel: value, logger: logger)
    }

    /// The server builder for `Application(server:)`.
    static func builder(limits: ConnectionLimits, count: BoundedCount, workers: RequestWorkers?) -> HTTPServerBuilder {
        HTTPServerBuilder { responder in
            let bodyTimeout = limits.bodyTimeout
            let configuration = HTTP1Channel.Configuration(additionalChannelHandlers: [RequestProgressHandler(bodyTimeout: bodyTimeout), ParkedSyncHandler()])
            return GuardedHTTP1Channel(base: HTTP1Channel(responder: responder, configuration: configuration), limits: limits, count: count, workers: workers)
        }
    }
}
