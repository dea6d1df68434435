import Foundation
import RevsyncRedis
import RevsyncServer

extension ServerSettings {
    /// What every test's server starts from: the repository's schema, a database of its own,
    /// the stack's Redis (or REVSYNC_TEST_REDIS_URL) with the cache on, as in production, and
    /// more patience than production has. Tests run in parallel on two cores against one
    /// PostgreSQL and one Redis, so each pool is kept small, and PostgreSQL and Redis may take
    /// longer than production allows (a server's first connection to Redis took more than
    /// the default 250 ms there, which left it degraded to PostgreSQL).
    public static func forTests(databaseURL: String) -> ServerSettings {
        var settings = ServerSettings()
        settings.databaseURL = databaseURL
        settings.schemaPath = defaultSchemaPath
        settings.databaseConnections = 6
        settings.databaseTimeout = .seconds(30)
        settings.redisURL = ProcessInfo.processInfo.environment["REVSYNC_TEST_REDIS_URL"] ?? "redis://127.0.0.1:63799"
        settings.redisConnectTimeout = RedisConfiguration.testConnectTimeout
        // A read of the history id every 5 s instead of every second: the whole suite runs a
        // hundred servers at once. Tests of the history id set their own interval.
        settings.historyCheckInterval = .seconds(5)
        return settings
    }
}
