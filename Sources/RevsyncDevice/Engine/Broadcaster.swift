import Synchronization

/// Fans values out to any number of `AsyncStream` subscribers.
final class Broadcaster<Element: Sendable>: Sendable {
    private struct State {
        var nextId = 0
        var continuations: [Int: AsyncStream<Element>.Continuation] = [:]
        var finished = false
    }

    private let state = Mutex(State())

    /// A new stream of every value published from now on (buffered without limit).
    func subscribe() -> AsyncStream<Element> {
        let (stream, continuation) = AsyncStream.makeStream(of: Element.self, bufferingPolicy: .unbounded)
        let id: Int? = state.withLock { state in
            guard !state.finished else { return nil }
            let id = state.nextId
            state.nextId += 1
            state.continuations[id] = continuation
            return id
        }
        guard let id else {
            continuation.finish()
            return stream
        }
        continuation.onTermination = { [weak self] _ in
            _ = self?.state.withLock { $0.continuations.removeValue(forKey: id) }
        }
        return stream
    }

    func publish(_ element: Element) {
        let continuations = state.withLock { Array($0.continuations.values) }
        for continuation in continuations { continuation.yield(element) }
    }

    /// Ends every stream; later subscribers get an empty one.
    func finish() {
        let continuations = state.withLock { state in
            state.finished = true
            defer { state.continuations = [:] }
            return Array(state.continuations.values)
        }
        for continuation in continuations { continuation.finish() }
    }
}
