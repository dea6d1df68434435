import Foundation

/// How ``ServerFleet`` runs its `revsync` processes.
public struct ServerFleetConfiguration: Sendable {
    /// Path of the `revsync` executable.
    public var executable: String
    /// One instance per port, on 127.0.0.1.
    public var ports: [Int]
    public var databaseURL: String
    /// nil runs the instances without the Redis cache (`REVSYNC_REDIS_URL=off`).
    public var redisURL: String?
    /// The Redis URL an instance (by index) uses instead of `redisURL`: a relay in front of the
    /// same Redis, which the soak cuts to partition that instance alone from Redis.
    public var instanceRedisURLs: [Int: String] = [:]
    public var adminToken: String
    /// The dataset schema file (`REVSYNC_SCHEMA`).
    public var schemaPath: String
    /// `REVSYNC_LOG_LEVEL` of the instances.
    public var logLevel: String
    /// Logs go here: `migrate.log` and `server-<index>.log`, appended across restarts.
    public var runDirectory: String
    /// More `REVSYNC_*` (or other) variables for every instance; they win over the ones above.
    public var extraEnvironment: [String: String]
    /// How long `revsync migrate` may take.
    public var migrateTimeout: Duration
    /// How long an instance may take from launch until `GET /ready` answers 200.
    public var readyTimeout: Duration
    /// Between SIGTERM and SIGKILL in ``ServerFleet/stopAll()``.
    public var stopGracePeriod: Duration

    public init(
        executable: String, ports: [Int], databaseURL: String, redisURL: String?, adminToken: String, schemaPath: String,
        logLevel: String = "warning", runDirectory: String, extraEnvironment: [String: String] = [:],
        migrateTimeout: Duration = .seconds(120), readyTimeout: Duration = .seconds(30), stopGracePeriod: Duration = .seconds(5)
    ) {
        self.executable = executable
        self.ports = ports
        self.databaseURL = databaseURL
        self.redisURL = redisURL
        self.adminToken = adminToken
        self.schemaPath = schemaPath
        self.logLevel = logLevel
        self.runDirectory = runDirectory
        self.extraEnvironment = extraEnvironment
        self.migrateTimeout = migrateTimeout
        self.readyTimeout = readyTimeout
        self.stopGracePeriod = stopGracePeriod
    }

    /// The environment of `revsync migrate` and `revsync serve`.
    var environment: [String: String] {
        var environment = ChildProcess.inheritedEnvironment()
        environment["REVSYNC_DATABASE_URL"] = databaseURL
        environment["REVSYNC_REDIS_URL"] = redisURL ?? "off"
        environment["REVSYNC_ADMIN_TOKEN"] = adminToken
        environment["REVSYNC_SCHEMA"] = schemaPath
        environment["REVSYNC_LOG_LEVEL"] = logLevel
        environment.merge(extraEnvironment) { _, extra in extra }
        return environment
    }

    /// The environment of instance `index`'s `revsync serve`: its own Redis URL if it has one.
    func environment(ofInstance index: Int) -> [String: String] {
        var environment = self.environment
        if redisURL != nil, let own = instanceRedisURLs[index] { environment["REVSYNC_REDIS_URL"] = own }
        return environment
    }

    /// An executable called `name` in the directory of the running program (`.build/debug/`
    /// for `revsync-sim` and for the test runner alike), or nil if there is none.
    public static func executableNextToThisProgram(named name: String) -> String? {
        var candidates: [URL] = []
        if let argument = CommandLine.arguments.first, !argument.isEmpty {
            candidates.append(URL(fileURLWithPath: argument).resolvingSymlinksInPath())
        }
        if let executable = Bundle.main.executableURL { candidates.append(executable.resolvingSymlinksInPath()) }
        candidates.append(URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath())
        for program in candidates {
            // A test bundle on macOS is a directory; its runner sits inside it, the products next to it.
            var directory = program.deletingLastPathComponent()
            if let bundle = program.pathComponents.firstIndex(where: { $0.hasSuffix(".xctest") }) {
                directory = URL(fileURLWithPath: "/" + program.pathComponents[1..<bundle].joined(separator: "/"))
            }
            let path = directory.appendingPathComponent(name).path
            if FileManager.default.isExecutableFile(atPath: path) { return path }
        }
        return nil
    }
}
