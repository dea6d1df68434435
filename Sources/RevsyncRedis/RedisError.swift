/// Why a Redis call failed.
///
/// The cache treats ``isUnavailable`` errors as "Redis cannot answer right now"
/// and falls back to the database; the others are bugs or data problems worth logging.
public enum RedisError: Error, Sendable, Hashable {
    /// No connection could be opened (refused, unresolvable host, connect timeout, failed `SELECT`).
    case connectionFailed(endpoint: String, reason: String)
    /// An open connection broke during a call (server closed it, reset, write failed).
    /// Whether the command ran on the server is unknown.
    case connectionLost(endpoint: String, reason: String)
    /// Redis did not answer within the command timeout. Whether the command ran is unknown.
    case timeout(endpoint: String, after: Duration)
    /// Redis answered with an error reply; `message` is Redis's text, e.g.
    /// `WRONGTYPE Operation against a key holding the wrong kind of value`.
    case server(message: String)
    /// The bytes on the wire were not valid RESP, or a request could not be encoded.
    case protocolError(String)
    /// Redis answered with a kind of reply the convenience method did not expect.
    case unexpectedReply(expected: String, got: RedisValue)
    /// The configuration (or the URL it came from) is unusable.
    case invalidConfiguration(String)
    /// The client was shut down.
    case shutDown

    /// Whether the error means Redis could not be reached or did not answer in time,
    /// as opposed to an answer the caller did not like.
    public var isUnavailable: Bool {
        switch self {
        case .connectionFailed, .connectionLost, .timeout, .shutDown: return true
        case .server, .protocolError, .unexpectedReply, .invalidConfiguration: return false
        }
    }
}

extension RedisError: CustomStringConvertible {
    /// A one-line explanation that names the server where one is involved.
    public var description: String {
        switch self {
        case .connectionFailed(let endpoint, let reason):
            return "cannot connect to Redis at \(endpoint): \(reason)"
        case .connectionLost(let endpoint, let reason):
            return "lost the connection to Redis at \(endpoint): \(reason)"
        case .timeout(let endpoint, let after):
            return "Redis at \(endpoint) did not answer within \(after)"
        case .server(let message):
            return "Redis replied with an error: \(message)"
        case .protocolError(let detail):
            return "Redis protocol error: \(detail)"
        case .unexpectedReply(let expected, let got):
            return "unexpected Redis reply: expected \(expected), got \(got)"
        case .invalidConfiguration(let detail):
            return "invalid Redis configuration: \(detail)"
        case .shutDown:
            return "the Redis client has been shut down"
        }
    }
}
