import RevsyncTestSupport

/// Polls `condition` until it holds; throws, naming `what`, after `limit`.
func eventually(
    _ what: String = "the condition", within limit: Duration = .seconds(30), _ condition: () async throws -> Bool
) async throws {
    let deadline = ContinuousClock.now + limit
    while try await !condition() {
        guard ContinuousClock.now < deadline else { throw TestSetupError("\(what) did not happen within \(limit)") }
        try await Task.sleep(for: .milliseconds(5))
    }
}
