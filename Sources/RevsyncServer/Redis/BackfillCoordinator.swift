/// Makes concurrent misses of the same revisions read PostgreSQL once: the first
/// caller reads, the others await its result.
actor BackfillCoordinator {
    private var inFlight: [[Int64]: Task<[CommittedEntry], any Error>] = [:]

    func load(_ revisions: [Int64], _ read: @Sendable @escaping () async throws -> [CommittedEntry]) async throws -> [CommittedEntry] {
        if let running = inFlight[revisions] { return try await running.value }
        // An unstructured task so that every waiter shares one read; it ends with the read.
        let task = Task { try await read() }
        inFlight[revisions] = task
        defer { inFlight[revisions] = nil }
        return try await task.value
    }
}
