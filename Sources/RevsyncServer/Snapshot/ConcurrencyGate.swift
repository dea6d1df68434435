/// Lets at most `limit` callers in at once; the others wait their turn, first come first served.
actor ConcurrencyGate {
    private let limit: Int
    private var inside = 0
    private var waiting: [CheckedContinuation<Void, Never>] = []

    init(limit: Int) {
        self.limit = max(1, limit)
    }

    func enter() async {
        if inside < limit {
            inside += 1
            return
        }
        await withCheckedContinuation { waiting.append($0) }
    }

    func leave() {
        if waiting.isEmpty {
            inside -= 1
        } else {
            // The place passes straight to the next caller.
            waiting.removeFirst().resume()
        }
    }

    /// Runs `body` inside the gate.
    func run<T: Sendable>(_ body: @Sendable () async throws -> T) async throws -> T {
        await enter()
        do {
            let value = try await body()
            leave()
            return value
        } catch {
            leave()
            throw error
        }
    }
}
