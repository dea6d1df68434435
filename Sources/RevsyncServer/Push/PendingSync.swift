import NIOCore
import RevsyncRules
import ServiceLifecycle
import Synchronization

/// A `/sync` request with nothing to answer yet, waiting for a commit after its `maxRevision`
/// (long-poll), held without a task of its own.
///
/// Over HTTP its connection holds it (`ParkedSyncHandler`): the request's task has returned,
/// so a waiter costs this object, an entry in `CommitWaiters` and a timer. When the wait ends,
/// `deliver` gets the answer's body, or the error to answer with, exactly once: at once for
/// the end of the wait or a release (an empty answer), after the read the commit's other
/// waiters share for a wake-up (`WokenSyncs`).
package final class PendingSync: Sendable {
    package typealias Deliver = @Sendable (Result<ByteBuffer, any Error>) -> Void

    let maxRevision: Int64
    let device: Device
    let gzip: Bool
    let limits: CatchUpLimits
    let wait: Duration
    /// The empty page read before waiting: the answer when nothing woke the request.
    let emptyPage: CatchUpPage
    /// Throws when the device was revoked while it waited.
    let stillAuthorized: (@Sendable () async throws -> Void)?
    let service: SyncService
    let longPoll: LongPoll
    /// The waiters' line of revisions when the empty page was read.
    let line: CommitWaiters.Line

    private struct State {
        var ticket: CommitWaiters.Ticket?
        var deliver: Deliver?
        /// Released before it started: it ends as soon as it starts.
        var released = false
    }

    private let state = Mutex(State())

    init(
        maxRevision: Int64, device: Device, gzip: Bool, limits: CatchUpLimits, wait: Duration, emptyPage: CatchUpPage,
        stillAuthorized: (@Sendable () async throws -> Void)?, service: SyncService, longPoll: LongPoll, line: CommitWaiters.Line
    ) {
        self.maxRevision = maxRevision
        self.device = device
        self.gzip = gzip
        self.limits = limits
        self.wait = wait
        self.emptyPage = emptyPage
        self.stillAuthorized = stillAuthorized
        self.service = service
        self.longPoll = longPoll
        self.line = line
    }

    /// Starts the wait. `deliver` may be called before this returns (a commit already past
    /// the request's revision, or a release that came first).
    package func start(deliver: @escaping Deliver) {
        let releasedEarly = state.withLock { state in
            state.deliver = deliver
            return state.released
        }
        if releasedEarly {
            ended(.init(ending: .released, at: .now))
            return
        }
        let ticket = longPoll.waiters.park(after: maxRevision, for: wait, line: line) { [self] result in ended(result) }
        let releaseNow = state.withLock { state in
            state.ticket = ticket
            return state.released
        }
        if releaseNow { longPoll.waiters.release(ticket) }
    }

    /// Ends the wait now with an empty answer (its connection is closing, the server stops).
    package func release() {
        let ticket = state.withLock { state in
            state.released = true
            return state.ticket
        }
        if let ticket { longPoll.waiters.release(ticket) }
    }

    /// Ends the wait with no answer: nobody is there to read it.
    package func abandon() {
        state.withLock { $0.deliver = nil }
        release()
    }

    /// The answer, awaited by the request's task: for a request that cannot be held by its
    /// connection (a second request pipelined behind a waiting one, or no HTTP connection at all).
    /// It gives its place among the requests in flight up while it waits, and graceful shutdown
    /// or the task's cancellation ends the wait.
    func answer(clientGone: EventLoopFuture<Void>?) async throws -> ByteBuffer {
        longPoll.inFlight?.leave()
        defer { longPoll.inFlight?.enterAnyway() }
        return try await withGracefulShutdownHandler {
            try await withTaskCancellationHandler {
                try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<ByteBuffer, any Error>) in
                    if Task.isShuttingDownGracefully { self.release() }
                    self.start { continuation.resume(with: $0) }
                    clientGone?.whenComplete { [self] _ in release() }
                }
            } onCancel: {
                self.release()
            }
        } onGracefulShutdown: {
            self.release()
        }
    }

    private func ended(_ result: CommitWaiters.WaitResult) {
        service.metrics.recordWaitEnded(result.ending)
        switch result.ending {
        case .committed:
            longPoll.woken.add(self, wokenAt: result.at)
        case .timedOut, .released:
            service.metrics.recordCatchUp(changeSets: 0, source: emptyPage.source, duration: ContinuousClock.now - result.at)
            deliver(.success(service.respond(emptyPage, maxRevision: maxRevision, acks: [], correctives: [], gzip: gzip)))
        }
    }

    /// The answer after a wake-up (run by `WokenSyncs`, one request after another).
    func answerWoken(at wokenAt: ContinuousClock.Instant) async {
        guard state.withLock({ $0.deliver != nil }) else { return }
        do {
            // A device revoked while it waited gets nothing committed meanwhile.
            try await stillAuthorized?()
            let (state, page) = try await service.wokenCatchUp(
                longPoll, after: maxRevision, wokenAt: wokenAt, device: device, limits: limits, form: gzip ? .deflated : .plain)
            try CatchUpRules.checkEnvelope(maxRevision: maxRevision, state: state)
            let now = ContinuousClock.now
            service.metrics.recordWakeToAnswer(now - wokenAt)
            service.metrics.recordCatchUp(changeSets: page.entries.count, source: page.source, duration: now - wokenAt)
            deliver(.success(service.respond(page, maxRevision: maxRevision, acks: [], correctives: [], gzip: gzip)))
        } catch {
            deliver(.failure(longPoll.woken.failed(error, device: device)))
        }
    }

    private func deliver(_ result: Result<ByteBuffer, any Error>) {
        let deliver = state.withLock { state in
            defer { state.deliver = nil }
            return state.deliver
        }
        deliver?(result)
    }
}
