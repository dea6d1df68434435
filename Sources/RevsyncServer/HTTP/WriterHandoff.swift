import HummingbirdCore
import Synchronization

/// A request's `ResponseWriter`, moved from its connection's task to the task that runs the
/// request (`RequestWorkers`).
///
/// Unchecked `Sendable` because `ResponseWriter` is not declared `Sendable` (it is
/// non-copyable, and Hummingbird hands it to the responder on the connection's task). It is
/// safe to move: its one stored property is the channel's `NIOAsyncChannelOutboundWriter`,
/// which is `Sendable`; the writer is taken out once, under the lock; and the connection's
/// task, which gave it, only waits until the request has run and never touches it again.
final class WriterHandoff: @unchecked Sendable {
    private var writer: ResponseWriter?
    private let lock = Mutex(())

    init(_ writer: consuming ResponseWriter) {
        self.writer = .some(writer)
    }

    /// The writer, the first time; nil after.
    func take() -> ResponseWriter? {
        lock.withLock { _ in writer.take() }
    }
}
