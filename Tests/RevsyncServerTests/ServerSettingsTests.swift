import Testing
@testable import RevsyncServer

/// `ServerSettings.fromEnvironment`: `REVSYNC_*` over the defaults, bad values refused by name.
@Suite struct ServerSettingsTests {
    @Test func withNothingSetTheDefaultsHold() throws {
        let settings = try ServerSettings.fromEnvironment([:])
        #expect(settings.redisConnectTimeout == .milliseconds(250))
        #expect(settings.databaseTimeout == .seconds(10))
        #expect(settings.redisURL == "redis://127.0.0.1:63799")
    }

    @Test func valuesAreReadAndKeptInTheirRange() throws {
        let settings = try ServerSettings.fromEnvironment([
            "REVSYNC_REDIS_CONNECT_TIMEOUT_MS": "2000",
            "REVSYNC_DB_TIMEOUT_SECONDS": "0",
            "REVSYNC_COMMIT_BATCH_SIZE": "500",
            "REVSYNC_REDIS_URL": "off",
            "REVSYNC_LISTEN": "[::1]:9000",
        ])
        #expect(settings.redisConnectTimeout == .seconds(2))
        // Zero would be no wait at all: the least is a second.
        #expect(settings.databaseTimeout == .seconds(1))
        // Past 64 savepoints PostgreSQL's subtransaction cache overflows.
        #expect(settings.commitBatchSize == 64)
        #expect(settings.redisURL == nil)
        #expect(settings.host == "::1" && settings.port == 9000)
        // A zero connect timeout would mean "block for ever" to the socket: the least is 1 ms.
        #expect(try ServerSettings.fromEnvironment(["REVSYNC_REDIS_CONNECT_TIMEOUT_MS": "0"]).redisConnectTimeout == .milliseconds(1))
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
