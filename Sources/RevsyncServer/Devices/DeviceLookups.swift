import RevsyncRules
import ServiceLifecycle
import Synchronization

/// The token look-ups that miss the cache, asked by one task for every request (a `Service`),
/// which the cache learns.
///
/// A fleet reconnecting after a deploy brings thousands of tokens the cache has not seen, all
/// at once: this asks PostgreSQL for up to `batchSize` of them in one query instead of one
/// query each, and a request waits for its row with one small frame. The query's own calls
/// (the lease, its task group, the PostgreSQL client's) run on this task, not on the
/// request's: a connection's task keeps the high-water mark of its frames for as long as the
/// connection lives, and a device's first request is otherwise its deepest.
final class DeviceLookups: Service, Sendable {
    private typealias Found = CheckedContinuation<Device?, any Error>

    private struct Waiting {
        let hash: [UInt8]
        /// The cache's generation when the request missed (`DeviceCache.store`).
        let generation: Int
        let found: Found
    }

    private struct State {
        var waiting: [Waiting] = []
        var stopped = false
    }

    /// Tokens asked for in one query at most.
    static let batchSize = 256

    private let directory: any DeviceDirectory
    private let cache: DeviceCache
    private let state = Mutex(State())
    private let wakeUps: AsyncStream<Void>
    private let wake: AsyncStream<Void>.Continuation

    init(directory: any DeviceDirectory, cache: DeviceCache) {
        self.directory = directory
        self.cache = cache
        // One wake-up pending is enough: each one drains everything waiting.
        (wakeUps, wake) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
    }

    /// The device whose token hashes to `hash`, or nil; asked with the others waiting
    /// meanwhile. Waits until `run` has started (the server runs it with its other services).
    /// - Throws: `SyncRefusal.deviceRevoked` for a revoked device's token.
    func device(_ hash: [UInt8], generation: Int) async throws -> Device? {
        try await withCheckedThrowingContinuation { (found: Found) in
            let stopped = state.withLock { state in
                guard !state.stopped else { return true }
                state.waiting.append(Waiting(hash: hash, generation: generation, found: found))
                return false
            }
            if stopped { found.resume(throwing: Self.stopping) } else { wake.yield() }
        }
    }

    /// Requests waiting for the next query (tests).
    var waitingCount: Int { state.withLock { $0.waiting.count } }

    func run() async throws {
        for await _ in wakeUps.cancelOnGracefulShutdown() {
            while let batch = next() { await answer(batch) }
        }
        // Shut down after the HTTP server (services stop in reverse order): nobody should be
        // waiting, but whoever is hears why.
        let left = state.withLock { state in
            state.stopped = true
            defer { state.waiting = [] }
            return state.waiting
        }
        for waiting in left { waiting.found.resume(throwing: Self.stopping) }
    }

    private func next() -> [Waiting]? {
        state.withLock { state in
            guard !state.waiting.isEmpty else { return nil }
            let batch = Array(state.waiting.prefix(Self.batchSize))
            state.waiting.removeFirst(batch.count)
            return batch
        }
    }

    private func answer(_ batch: [Waiting]) async {
        let rows: [[UInt8]: DeviceRow]
        let asked = ContinuousClock.now
        do {
            rows = try await directory.find(tokenHashes: Array(Set(batch.map(\.hash))))
        } catch {
            for waiting in batch { waiting.found.resume(throwing: error) }
            return
        }
        for waiting in batch {
            guard let row = rows[waiting.hash] else {
                await cache.storeUnknown(waiting.hash)
                waiting.found.resume(returning: nil)
                continue
            }
            guard !row.revoked else {
                waiting.found.resume(throwing: SyncRefusal.deviceRevoked)
                continue
            }
            await cache.store(row.device, for: waiting.hash, generation: waiting.generation, readAt: asked)
            waiting.found.resume(returning: row.device)
        }
    }

    private static let stopping = SyncRefusal(.unavailable, "the server is shutting down: send the request again", retryAfterSeconds: 1)
}
