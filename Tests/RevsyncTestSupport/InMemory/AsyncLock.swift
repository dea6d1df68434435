/// One holder at a time, waiting without blocking a thread: in-memory transactions run one after another.
actor AsyncLock {
    private var held = false
    private var waiting: [CheckedContinuation<Void, Never>] = []

    func lock() async {
        guard held else {
            held = true
            return
        }
        await withCheckedContinuation { waiting.append($0) }
    }

    func unlock() {
        if waiting.isEmpty {
            held = false
        } else {
            waiting.removeFirst().resume()
        }
    }

    func run<T: Sendable>(_ body: @Sendable () async throws -> T) async throws -> T {
        await lock()
        do {
            let result = try await body()
            unlock()
            return result
        } catch {
            unlock()
            throw error
        }
    }
}
