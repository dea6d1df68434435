import NIOCore
import NIOPosix

/// Clients that ask for a snapshot, read its first bytes and then stop reading, as a phone
/// that went into a tunnel does: what the server holds for each while they keep their
/// connections open is what many of them could make it hold.
///
/// Each is a raw SwiftNIO channel that reads only when told, with a small receive buffer (set
/// before connecting, so the kernel neither grows it nor advertises more) so that the answer
/// waits on the server's side rather than in this process's socket.
struct SlowSnapshotReaders {
    /// Bytes each reads before it stops: the status line and headers, and a little of the body.
    static let firstBytes = 4096
    /// The receive buffer each asks the kernel for (which doubles it).
    static let receiveBuffer = 4096

    private let channels: [any Channel]

    var count: Int { channels.count }

    /// One reader per token, each on a connection of its own; returns once every one has read
    /// its first bytes and stopped. Throws when an answer is not `200`, or when one reader waits
    /// longer than `timeout` for its first bytes.
    static func open(
        port: Int, tokens: [String], kind: SnapshotAnswer.Kind, timeout: Duration, group: any EventLoopGroup
    ) async throws -> SlowSnapshotReaders {
        var channels: [any Channel] = []
        do {
            for token in tokens {
                let started = group.any().makePromise(of: Void.self)
                let channel: any Channel
                do {
                    channel = try await ClientBootstrap(group: group)
                        .connectTimeout(.seconds(10))
                        .channelOption(.autoRead, value: false)
                        .channelOption(.socketOption(.so_rcvbuf), value: SocketOptionValue(receiveBuffer))
                        .channelInitializer { channel in
                            channel.eventLoop.makeCompletedFuture {
                                try channel.pipeline.syncOperations.addHandler(FirstBytesHandler(wanted: firstBytes, started: started))
                            }
                        }
                        .connect(host: "127.0.0.1", port: port).get()
                } catch {
                    started.fail(error)
                    throw error
                }
                channels.append(channel)
                var head = "GET /snapshot HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nAuthorization: Bearer \(token)\r\n"
                if kind == .sqlite { head += "Accept: \(SnapshotAnswer.Kind.sqliteType)\r\n" }
                head += "\r\n"
                try await channel.writeAndFlush(ByteBuffer(string: head))
                channel.read()
                let late = channel.eventLoop.scheduleTask(in: .nanoseconds(Int64(timeout.components.seconds) * 1_000_000_000)) {
                    started.fail(BenchError("a slow snapshot reader had no answer within \(timeout)"))
                }
                defer { late.cancel() }
                try await started.futureResult.get()
            }
        } catch {
            for channel in channels { try? await channel.close() }
            throw error
        }
        return SlowSnapshotReaders(channels: channels)
    }

    func close() async {
        for channel in channels { try? await channel.close() }
    }
}

/// Checks that the answer's status line says `200` as soon as it has come (an error answer
/// is shorter than `wanted`), reads until `wanted` bytes have come, and then reads no more.
private final class FirstBytesHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer

    private let wanted: Int
    private let started: EventLoopPromise<Void>
    private var received = ByteBuffer()
    private var done = false

    init(wanted: Int, started: EventLoopPromise<Void>) {
        self.wanted = wanted
        self.started = started
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var bytes = unwrapInboundIn(data)
        if !done { received.writeBuffer(&bytes) }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        guard !done else { return }
        let text = String(buffer: received.getSlice(at: received.readerIndex, length: min(received.readableBytes, 200)) ?? ByteBuffer())
        if let line = text.split(separator: "\r\n", maxSplits: 1, omittingEmptySubsequences: false).first, text.contains("\r\n"),
            !line.hasPrefix("HTTP/1.1 200")
        {
            done = true
            started.fail(BenchError("a slow snapshot reader was answered: \(line)"))
            return
        }
        if received.readableBytes < wanted {
            context.read()
            return
        }
        done = true
        started.succeed(())
    }

    func channelInactive(context: ChannelHandlerContext) {
        if !done {
            done = true
            started.fail(BenchError("a slow snapshot reader's connection closed after \(received.readableBytes) bytes"))
        }
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if !done {
            done = true
            started.fail(error)
        }
        context.close(promise: nil)
    }
}
