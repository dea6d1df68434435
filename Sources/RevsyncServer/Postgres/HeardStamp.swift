import NIOCore
import Synchronization

/// When a PostgreSQL connection last received anything: a pass-through handler at the head of
/// its channel's pipeline (`ConnectionSetup`), so that `ConnectionLeaseWatch` can tell a
/// PostgreSQL that answers slowly from one that answers nothing. One atomic store per read.
final class HeardStamp: ChannelInboundHandler, Sendable {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    /// `NIODeadline` nanoseconds of the last read; 0 before the first.
    private let lastRead = Atomic<UInt64>(0)

    /// The last time anything arrived, if anything has since the stamp was added.
    var last: NIODeadline? {
        let nanoseconds = lastRead.load(ordering: .relaxed)
        return nanoseconds == 0 ? nil : NIODeadline.uptimeNanoseconds(nanoseconds)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        lastRead.store(NIODeadline.now().uptimeNanoseconds, ordering: .relaxed)
        context.fireChannelRead(data)
    }
}
