import RevsyncRedis
import Testing

@Suite struct RedisConfigurationURLTests {
    @Test func hostPortAndDatabaseAreRead() throws {
        let configuration = try RedisConfiguration(url: "redis://cache.internal:63799/3")
        #expect(configuration.host == "cache.internal")
        #expect(configuration.port == 63799)
        #expect(configuration.database == 3)
        #expect(configuration.poolSize == 4)
        #expect(configuration.connectTimeout == .milliseconds(250))
    }

    @Test func portAndDatabaseHaveDefaults() throws {
        let configuration = try RedisConfiguration(url: "redis://127.0.0.1")
        #expect(configuration.port == 6379)
        #expect(configuration.database == 0)
        #expect(try RedisConfiguration(url: "REDIS://127.0.0.1:7000/").database == 0)
    }

    @Test func bracketedIPv6HostIsUnwrapped() throws {
        let configuration = try RedisConfiguration(url: "redis://[::1]:6380/2")
        #expect(configuration.host == "::1")
        #expect(configuration.port == 6380)
        #expect(configuration.endpoint == "[::1]:6380")
        #expect(configuration.url == "redis://[::1]:6380/2")
    }

    @Test(arguments: [
        ("127.0.0.1:6379", "no scheme"),
        ("http://127.0.0.1:6379", "unsupported scheme \"http\""),
        ("rediss://127.0.0.1:6379", "TLS (rediss://) is not supported"),
        ("redis://:6379", "no host"),
        ("redis://host:0", "port \"0\""),
        ("redis://host:65536", "port \"65536\""),
        ("redis://host:+5", "port \"+5\""),
        ("redis://host:port", "port \"port\""),
        ("redis://user:secret@host:6379", "credentials are not supported"),
        ("redis://host:6379/x", "database \"x\""),
        ("redis://host:6379/-1", "database \"-1\""),
        ("redis://host:6379/0/1", "database \"0/1\""),
        ("redis://host:6379?timeout=1", "query options are not supported"),
        ("redis://::1:6379", "an IPv6 host must be in brackets"),
        ("redis://[::1:6379", "unclosed"),
    ])
    func anythingElseIsRejectedWithTheReason(url: String, reason: String) {
        #expect {
            try RedisConfiguration(url: url)
        } throws: { error in
            guard case .invalidConfiguration(let message) = error as? RedisError else { return false }
            return message.contains(reason) && message.contains(url) && message.contains("redis://host:port[/db]")
        }
    }

    @Test func clientRejectsUnusableSettings() {
        var configuration = RedisConfiguration()
        configuration.poolSize = 0
        #expect(throws: RedisError.self) { try RedisClient(configuration: configuration) }
        configuration = RedisConfiguration()
        configuration.commandTimeout = .zero
        #expect(throws: RedisError.self) { try RedisClient(configuration: configuration) }
    }
}
