import RevsyncRules

/// Makes concurrent misses of the same revisions read PostgreSQL once: the first
/// caller reads, the others await its result.
actor BackfillCoordinator {
    struct Range: Hashable {
        let first: Int64
        let last: Int64
        let limits: CatchUpLimits
    }

    private var inFlight: [Range: Task<[CachedEntry], any Error>] = [:]

    func load(_ range: Range, _ read: @Sendable @escaping () async throws -> [CachedEntry]) async throws -> [CachedEntry] {
        if let running = inFlight[range] { return try await running.value }
        // An unstructured task so that every waiter shares one read; it ends with the read.
        let task = Task { try await read() }
        inFlight[range] = task
        defer { inFlight[range] = nil }
        return try await task.value
    }
}
