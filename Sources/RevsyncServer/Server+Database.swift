extension Server {
    /// Runs `body` while the PostgreSQL client runs (for commands that are not the server).
    public func runWithDatabase<T: Sendable>(_ body: @Sendable @escaping () async throws -> T) async throws -> T {
        let postgres = self.postgres
        return try await withThrowingTaskGroup(of: T?.self) { group in
            group.addTask {
                await postgres.run()
                return nil
            }
            defer { group.cancelAll() }
            return try await body()
        }
    }
}
