import Logging
import RevsyncHarness
import ServiceLifecycle
import Synchronization

/// Runs a service whose stop must not hold up the server's: once told to stop (graceful
/// shutdown or cancellation), the service gets `limit` to return, and then this returns
/// without it.
///
/// For PostgreSQL's client. PostgresNIO 1.33's pool can fail to return from `run()` when a
/// connection's keep-alive is under way as the pool closes its connections: in a loop of
/// client starts and stops with a keep-alive every 5 ms, 1 of 150 `run()`s never returned.
/// Every connection is closed by then; what is left is the pool's own task, which would keep
/// SIGTERM from ending the process (and a test from ending) for ever. The server's
/// keep-alive runs every second (see `Server`), so it would happen on some stops.
///
/// It announces its start (`AnnouncesStart`) right before it calls the service's `run()`:
/// `withRunning` and the application's migrations wait for that, so that no lease comes
/// before the client runs (PostgresNIO warns of each one).
public struct BoundedStop<Wrapped: Service>: AnnouncesStart {
    let service: Wrapped
    let limit: Duration
    let logger: Logger
    public let start = ServiceStart()

    public init(_ service: Wrapped, limit: Duration, logger: Logger) {
        self.service = service
        self.limit = limit
        self.logger = logger
    }

    public func run() async throws {
        let ended = EndSignal()
        let service = self.service, start = self.start
        // A task of its own, so that waiting for it can end without it. It inherits the
        // graceful shutdown this task is told of.
        let running = Task {
            do {
                start.announce()
                try await service.run()
                ended.fire(.success(()))
            } catch {
                ended.fire(.failure(error))
            }
        }
        let limit = self.limit
        let giveUp = { @Sendable in
            Task {
                try? await Task.sleep(for: limit)
                ended.fire(nil)
            }
        }
        let outcome = await withGracefulShutdownHandler {
            await withTaskCancellationHandler {
                await ended.wait()
            } onCancel: {
                running.cancel()
                _ = giveUp()
            }
        } onGracefulShutdown: {
            _ = giveUp()
        }
        guard let outcome else {
            logger.warning("a service did not stop within \(limit) of being told to; the server stops without it", metadata: ["service": "\(Wrapped.self)"])
            return
        }
        try outcome.get()
    }
}

/// The first of: the service's end (its result), or giving up on it (nil).
private final class EndSignal: Sendable {
    private struct State {
        var outcome: Result<Void, any Error>??
        var waiter: CheckedContinuation<Result<Void, any Error>?, Never>?
    }

    private let state = Mutex(State())

    func fire(_ outcome: Result<Void, any Error>?) {
        let waiter = state.withLock { state -> CheckedContinuation<Result<Void, any Error>?, Never>? in
            guard state.outcome == nil else { return nil }
            state.outcome = .some(outcome)
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume(returning: outcome)
    }

    func wait() async -> Result<Void, any Error>? {
        await withCheckedContinuation { continuation in
            let outcome = state.withLock { state -> Result<Void, any Error>?? in
                if let outcome = state.outcome { return .some(outcome) }
                state.waiter = continuation
                return nil
            }
            if let outcome { continuation.resume(returning: outcome) }
        }
    }
}
