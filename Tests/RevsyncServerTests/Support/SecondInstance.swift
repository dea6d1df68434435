import Foundation
import Hummingbird
import HummingbirdTesting
import Logging
@testable import RevsyncServer

extension TestHarness {
    /// Runs `body` against a second server instance on the same database and Redis, with its own
    /// caches, as another process of a deployment would be.
    func withSecondInstance<T: Sendable>(
        configure: (inout ServerSettings) -> Void = { _ in }, applyDelay: ApplyDelay? = nil, _ body: @Sendable (TestHarness) async throws -> T
    ) async throws -> T {
        var settings = server.settings
        configure(&settings)
        var logger = Logger(label: "revsync.tests.second")
        logger.logLevel = .warning
        let second = try Server(settings: settings, logger: logger, applyDelay: applyDelay)
        return try await second.buildApplication().test(.router) { client in
            try await body(TestHarness(client: client, server: second))
        }
    }
}
