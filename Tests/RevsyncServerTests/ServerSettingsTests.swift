import Foundation
import Logging
import PostgresNIO
import RevsyncTestSupport
import Testing
@testable import RevsyncServer

/// `ServerSettings.fromEnvironment`: `REVSYNC_*` over the defaults, bad values refused by name.
@Suite struct ServerSettingsTests {
    @Test func withNothingSetTheDefaultsHold() throws {
        let settings = try ServerSettings.fromEnvironment([:])
        #expect(settings.redisConnectTimeout == .milliseconds(250))
        #expect(settings.databaseTimeout == .seconds(10))
        #expect(settings.redisURL == "redis://127.0.0.1:63799")
        #expect(settings.deviceCheckInterval == .milliseconds(500))
        #expect(settings.redisCommandTimeout == .seconds(2))
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
            "REVSYNC_REDIS_COMMAND_TIMEOUT_MS": "30000",
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
        #expect(settings.redisCommandTimeout == .seconds(30))
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
        // No host: every interface to some tools, loopback to others; the error says which is which.
        #expect { try ServerSettings.fromEnvironment(["REVSYNC_LISTEN": ":8080"]) } throws: { error in
            "\(error)" == "REVSYNC_LISTEN \":8080\" names no host: use 0.0.0.0:8080 for every interface, or 127.0.0.1:8080 for this machine only"
        }
    }

    /// A duration past what a timer or PostgreSQL can take (an attempt at "never") is refused
    /// by name at start, instead of trapping on the first connection or wait.
    @Test func aDurationTooLongIsRefusedByName() throws {
        for name in ["REVSYNC_HTTP_IDLE_TIMEOUT_SECONDS", "REVSYNC_MAX_WAIT_SECONDS", "REVSYNC_SNAPSHOT_KEEP_REPLACED_SECONDS"] {
            #expect { try ServerSettings.fromEnvironment([name: "10000000000"]) } throws: { error in
                "\(error)" == "\(name) must be at most 2592000, not 10000000000"
            }
        }
        #expect { try ServerSettings.fromEnvironment(["REVSYNC_CACHE_RECONCILE_MS": "9223372036854775807"]) } throws: { error in
            "\(error)" == "REVSYNC_CACHE_RECONCILE_MS must be at most 2592000000, not 9223372036854775807"
        }
        // PostgreSQL's statement_timeout is at most 2^31 - 1 ms.
        #expect { try ServerSettings.fromEnvironment(["REVSYNC_DB_TIMEOUT_SECONDS": "2147484"]) } throws: { error in
            "\(error)" == "REVSYNC_DB_TIMEOUT_SECONDS must be at most 86400, not 2147484"
        }
        let longest = try ServerSettings.fromEnvironment(["REVSYNC_MAX_WAIT_SECONDS": "2592000", "REVSYNC_DB_TIMEOUT_SECONDS": "86400"])
        #expect(longest.maxWait == .seconds(2_592_000) && longest.databaseTimeout == .seconds(86_400))
    }

    /// The metrics token, like the admin tokens, is read without the newline a secret's file ends in.
    @Test func theMetricsTokenIsTrimmed() throws {
        #expect(try ServerSettings.fromEnvironment(["REVSYNC_METRICS_TOKEN": "s3cret\n"]).metricsToken == "s3cret")
        // A token of whitespace (an empty secret file) must not open /metrics: refused.
        #expect { try ServerSettings.fromEnvironment(["REVSYNC_METRICS_TOKEN": " \n"]) } throws: { error in
            "\(error)" == "REVSYNC_METRICS_TOKEN holds only whitespace: set a token, or unset it to leave /metrics open"
        }
    }

    /// `sslmode` as libpq reads it: `require` encrypts without checking the certificate (a
    /// managed service's own CA), `verify-ca` and `verify-full` check it, `sslrootcert` names
    /// the roots; an unknown mode or an unreadable root file is refused by name.
    @Test func sslModesMeanWhatLibpqMeans() throws {
        #expect(try DatabaseURL.tls("disable", rootCertificate: nil) == nil)
        let prefer = try #require(try DatabaseURL.tls("prefer", rootCertificate: nil))
        #expect(!prefer.required && prefer.configuration.certificateVerification == .none)
        let allow = try #require(try DatabaseURL.tls("allow", rootCertificate: nil))
        #expect(!allow.required && allow.configuration.certificateVerification == .none)
        let require = try #require(try DatabaseURL.tls("require", rootCertificate: nil))
        #expect(require.required && require.configuration.certificateVerification == .none)
        let verifyCA = try #require(try DatabaseURL.tls("verify-ca", rootCertificate: nil))
        #expect(verifyCA.required && verifyCA.configuration.certificateVerification == .noHostnameVerification)
        let verifyFull = try #require(try DatabaseURL.tls("verify-full", rootCertificate: nil))
        #expect(verifyFull.required && verifyFull.configuration.certificateVerification == .fullVerification)

        let roots = FileManager.default.temporaryDirectory.appendingPathComponent("roots-\(UUID().uuidString).pem").path
        #expect(FileManager.default.createFile(atPath: roots, contents: Data("-----BEGIN CERTIFICATE-----\n".utf8)))
        defer { try? FileManager.default.removeItem(atPath: roots) }
        let requireWithRoots = try #require(try DatabaseURL.tls("require", rootCertificate: roots))
        #expect(requireWithRoots.configuration.certificateVerification == .noHostnameVerification)
        #expect(requireWithRoots.configuration.trustRoots == .file(roots))
        let preferWithRoots = try #require(try DatabaseURL.tls("prefer", rootCertificate: roots))
        #expect(!preferWithRoots.required && preferWithRoots.configuration.certificateVerification == .noHostnameVerification)

        #expect { try DatabaseURL.tls("required", rootCertificate: nil) } throws: { error in
            "\(error)" == "sslmode \"required\" in REVSYNC_DATABASE_URL is not one of disable, allow, prefer, require, verify-ca, verify-full"
        }
        #expect { try DatabaseURL.tls("verify-full", rootCertificate: "/nonexistent/root.pem") } throws: { error in
            "\(error)" == "sslrootcert in REVSYNC_DATABASE_URL names \"/nonexistent/root.pem\", which is not a readable file"
        }
        // Through the whole URL, as the server reads it.
        _ = try DatabaseURL.configuration("postgres://u@db.example/revsync?sslmode=require", connections: 2)
    }

    /// TCP keep-alive as libpq names it in a URL: ours by default, `keepalives=0` for the
    /// system's settings, 0 for one value the system's; anything else is refused by name.
    @Test func keepAliveParametersAreReadAsLibpqNamesThem() throws {
        let standard = try #require(try DatabaseURL.keepAlive("postgres://u@db.example/revsync"))
        #expect(standard == TCPKeepAlive())
        #expect((standard.idle, standard.interval, standard.count, standard.userTimeoutMilliseconds) == (5, 2, 3, 10_000))
        #expect(try DatabaseURL.keepAlive("postgres://u@db.example/revsync?keepalives=0&keepalives_idle=9") == nil)
        let chosen = try #require(
            try DatabaseURL.keepAlive(
                "postgres://u@db.example/revsync?sslmode=require&keepalives=1&keepalives_idle=30&keepalives_interval=0&keepalives_count=9&tcp_user_timeout=60000"))
        #expect((chosen.idle, chosen.interval, chosen.count, chosen.userTimeoutMilliseconds) == (30, 0, 9, 60_000))
        #expect { try DatabaseURL.keepAlive("postgres://u@db.example/revsync?keepalives=yes") } throws: { error in
            "\(error)" == "keepalives in REVSYNC_DATABASE_URL must be 0 or 1, not \"yes\""
        }
        #expect { try DatabaseURL.keepAlive("postgres://u@db.example/revsync?keepalives_idle=40000") } throws: { error in
            "\(error)" == "keepalives_idle in REVSYNC_DATABASE_URL must be a whole number of seconds from 0 (the system's) to 32767, not \"40000\""
        }
        #expect { try DatabaseURL.keepAlive("postgres://u@db.example/revsync?tcp_user_timeout=-1") } throws: { error in
            "\(error)" == "tcp_user_timeout in REVSYNC_DATABASE_URL must be a whole number of milliseconds from 0 (the system's) to 2147483647, not \"-1\""
        }
        // PostgreSQL's end of each connection gets the same, and the connections a name.
        let startup = try DatabaseURL.configuration(
            "postgres://u@db.example/revsync?keepalives_interval=0&application_name=shop-1", connections: 2
        ).options.additionalStartupParameters.map { "\($0)=\($1)" }
        #expect(Set(startup).isSuperset(of: ["application_name=shop-1", "tcp_keepalives_idle=5", "tcp_keepalives_count=3", "tcp_user_timeout=10000"]))
        #expect(!startup.contains { $0.hasPrefix("tcp_keepalives_interval=") })
        let off = try DatabaseURL.configuration("postgres://u@db.example/revsync?keepalives=0", connections: 2).options.additionalStartupParameters
        #expect(off.map(\.0) == ["TimeZone", "application_name"] && off[1].1 == "revsync")
        // With the server's timeout: a statement, a lock wait, and twice that between two statements.
        let timed = try DatabaseURL.configuration("postgres://u@db.example/revsync", connections: 2, statementTimeout: .milliseconds(2500))
            .options.additionalStartupParameters.map { "\($0)=\($1)" }
        #expect(Set(timed).isSuperset(of: ["statement_timeout=2500", "lock_timeout=2500", "idle_in_transaction_session_timeout=5000"]))
        // The server refuses to start on it, before connecting to anything.
        var settings = ServerSettings.forTests(databaseURL: "postgres://u@127.0.0.1:1/revsync?keepalives_count=x")
        settings.redisURL = nil
        #expect { try Server(settings: settings, logger: Logger(label: "test")) } throws: { error in
            "\(error)" == "keepalives_count in REVSYNC_DATABASE_URL must be a whole number of probes from 0 (the system's) to 127, not \"x\""
        }
    }
}
