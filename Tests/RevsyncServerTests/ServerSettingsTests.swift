import Logging
import Testing
@testable import RevsyncServer

/// `ServerSettings.fromEnvironment`: `REVSYNC_*` over the defaults, bad values refused by name.
@Suite struct ServerSettingsTests {
    @Test func withNothingSetTheDefaultsHold() throws {
        let settings = try ServerSettings.fromEnvironment([:])
        #expect(settings.redisConnectTimeout == .milliseconds(250))
        #expect(settings.databaseTimeout == .seconds(10))
        #expect(settings.redisURL == "redis://127.0.0.1:63799")
        #expect(settings.deviceCheckInterval == .seconds(1))
    }

    @Test func valuesAreReadAndKeptInTheirRange() throws {
        let settings = try ServerSettings.fromEnvironment([
            "REVSYNC_REDIS_CONNECT_TIMEOUT_MS": "2000",
            "REVSYNC_DB_TIMEOUT_SECONDS": "0",
            "REVSYNC_COMMIT_BATCH_SIZE": "500",
            "REVSYNC_REDIS_URL": "off",
            "REVSYNC_LISTEN": "[::1]:9000",
            "REVSYNC_DB_KEEPALIVE_SECONDS": "3",
            "REVSYNC_DEVICE_CHECK_MS": "5000",
        ])
        #expect(settings.redisConnectTimeout == .seconds(2))
        // Zero would be no wait at all: the least is a second.
        #expect(settings.databaseTimeout == .seconds(1))
        // Past 64 savepoints PostgreSQL's subtransaction cache overflows.
        #expect(settings.commitBatchSize == 64)
        #expect(settings.redisURL == nil)
        #expect(settings.host == "::1" && settings.port == 9000)
        #expect(settings.databaseKeepAlive == .seconds(3))
        #expect(settings.deviceCheckInterval == .seconds(5))
        #expect(try ServerSettings.fromEnvironment(["REVSYNC_DEVICE_CHECK_MS": "1"]).deviceCheckInterval == .milliseconds(10))
        // A zero connect timeout would mean "block for ever" to the socket: the least is 1 ms.
        #expect(try ServerSettings.fromEnvironment(["REVSYNC_REDIS_CONNECT_TIMEOUT_MS": "0"]).redisConnectTimeout == .milliseconds(1))
    }

    /// The pool's keep-alive bounds a request's wait while PostgreSQL refuses more
    /// connections, so it never comes near the wait a request is allowed.
    @Test func theKeepAliveIsAtMostHalfTheDatabaseTimeout() throws {
        var settings = ServerSettings()
        #expect(try Server.postgresConfiguration(settings).options.keepAliveBehavior?.frequency == .seconds(5))
        settings.databaseTimeout = .seconds(4)
        #expect(try Server.postgresConfiguration(settings).options.keepAliveBehavior?.frequency == .seconds(2))
        settings.databaseKeepAlive = .seconds(1)
        #expect(try Server.postgresConfiguration(settings).options.keepAliveBehavior?.frequency == .seconds(1))
    }

    /// Zero would refuse every request (or every write): each limit has a least value.
    @Test func requestLimitsOfZeroAreRaisedToTheirLeast() throws {
        let limits = try ServerSettings.fromEnvironment([
            "REVSYNC_MAX_BODY_BYTES": "0", "REVSYNC_MAX_INFLATED_BYTES": "0", "REVSYNC_MAX_JSON_DEPTH": "0", "REVSYNC_MAX_CHANGE_SETS": "0",
        ]).limits
        #expect(limits.maxBodyBytes == 1024)
        #expect(limits.maxInflatedBytes == 1024)
        // A change set's attribute values sit six levels deep.
        #expect(limits.maxJSONDepth == 8)
        #expect(limits.maxChangeSetsPerRequest == 1)
        let kept = try ServerSettings.fromEnvironment(["REVSYNC_MAX_JSON_DEPTH": "12", "REVSYNC_MAX_BODY_BYTES": "4096"]).limits
        #expect(kept.maxJSONDepth == 12 && kept.maxBodyBytes == 4096)
    }

    @Test func aLogLevelIsOneOfSwiftLogsOrRefusedByName() throws {
        #expect(try Logger.Level(setting: nil, named: "REVSYNC_LOG_LEVEL") == .info)
        #expect(try Logger.Level(setting: "", named: "REVSYNC_LOG_LEVEL") == .info)
        #expect(try Logger.Level(setting: "debug", named: "REVSYNC_LOG_LEVEL") == .debug)
        #expect { try Logger.Level(setting: "debgu", named: "--log-level") } throws: { error in
            "\(error)" == "--log-level must be one of trace, debug, info, notice, warning, error, critical, not \"debgu\""
        }
    }

    @Test func aValueThatIsNotANumberIsRefusedByName() {
        #expect { try ServerSettings.fromEnvironment(["REVSYNC_REDIS_CONNECT_TIMEOUT_MS": "2s"]) } throws: { error in
            "\(error)" == "REVSYNC_REDIS_CONNECT_TIMEOUT_MS must be a non-negative integer, not \"2s\""
        }
        #expect { try ServerSettings.fromEnvironment(["REVSYNC_LISTEN": "localhost"]) } throws: { error in
            "\(error)".hasPrefix("REVSYNC_LISTEN must be host:port")
        }
    }
}
