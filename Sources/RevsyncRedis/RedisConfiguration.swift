/// Where the Redis server is and how patient to be with it.
public struct RedisConfiguration: Sendable, Hashable {
    /// Host name or IP address (IPv6 without brackets).
    public var host: String
    /// TCP port.
    public var port: Int
    /// Database index sent with `SELECT` on every new connection when it is not 0.
    public var database: Int
    /// How long opening a TCP connection may take. Short, so that a call made
    /// while Redis is down fails quickly instead of holding up a request.
    public var connectTimeout: Duration
    /// How long Redis may stay silent while calls wait on a connection before they fail with
    /// ``RedisError/timeout(endpoint:after:)`` and the connection is replaced.
    public var commandTimeout: Duration
    /// How many connections the client keeps at most; concurrent calls share them, pipelined.
    public var poolSize: Int
    /// After a failed connect, calls fail straight away with the same error for
    /// this long rather than each paying for another attempt; zero retries every time.
    public var connectRetryDelay: Duration

    /// Creates a configuration; the defaults suit a Redis on the same host or network.
    public init(
        host: String = "127.0.0.1",
        port: Int = 6379,
        database: Int = 0,
        connectTimeout: Duration = .milliseconds(250),
        commandTimeout: Duration = .seconds(2),
        poolSize: Int = 4,
        connectRetryDelay: Duration = .milliseconds(100)
    ) {
        self.host = host
        self.port = port
        self.database = database
        self.connectTimeout = connectTimeout
        self.commandTimeout = commandTimeout
        self.poolSize = poolSize
        self.connectRetryDelay = connectRetryDelay
    }

    /// `host:port` as used in error messages and logs (IPv6 hosts in brackets).
    public var endpoint: String {
        host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
    }

    /// Checks the values a client cannot work with.
    func validate() throws(RedisError) {
        guard !host.isEmpty else { throw .invalidConfiguration("the host is empty") }
        guard (1...65535).contains(port) else { throw .invalidConfiguration("port \(port) is not in 1...65535") }
        guard database >= 0, database <= Int(Int32.max) else {
            throw .invalidConfiguration("database index \(database) is negative or too large")
        }
        guard poolSize >= 1 else { throw .invalidConfiguration("pool size \(poolSize) must be at least 1") }
        // A zero socket timeout means "block forever" to the kernel, the opposite of what a caller would mean.
        guard connectTimeout > .zero else { throw .invalidConfiguration("the connect timeout must be positive") }
        guard commandTimeout > .zero else { throw .invalidConfiguration("the command timeout must be positive") }
        guard connectRetryDelay >= .zero else { throw .invalidConfiguration("the connect retry delay is negative") }
    }
}
