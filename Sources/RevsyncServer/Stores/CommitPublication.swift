import NIOCore

/// A batch's publication once this instance's own reads find its entries: the cache's write
/// for the other instances, under way (`ChangeLog.didCommit`).
///
/// The batch's requests are answered meanwhile: their answers come from the instance's
/// memory, and the cache's round trip is no longer part of each one's time. What must follow
/// the write (the next batch's publication, waking the instance's waiters) is hung on it.
public struct CommitPublication: Sendable {
    private let written: EventLoopFuture<Void>?

    /// A publication with nothing under way (no cache, or the cache is down).
    public static let done = CommitPublication(nil)

    /// - Parameter written: completes once the other instances can read the entries, or the
    ///   write has failed.
    public init(_ written: EventLoopFuture<Void>?) { self.written = written }

    /// Calls `body` once the write has ended, whichever way (at once when nothing is under way),
    /// on the thread that ended it.
    public func whenDone(_ body: @escaping @Sendable () -> Void) {
        guard let written else { return body() }
        written.whenComplete { _ in body() }
    }
}
