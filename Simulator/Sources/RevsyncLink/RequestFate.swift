/// What the link does to one request.
public enum RequestFate: String, Sendable, Hashable, CaseIterable {
    /// Forwarded both ways untouched (apart from latency and bandwidth).
    case pass
    /// The connection is closed (with a TCP reset) before anything reaches the server.
    case refuse
    /// Part of the request reaches the server, then both connections close.
    case resetMidRequest
    /// The server answers; part of the answer reaches the device, then the connection closes.
    case resetMidResponse
    /// The server answers; the device hears nothing until the stall ends and the connection closes.
    case stall
    /// The server answers (it has committed); the answer is discarded and the device's connection closes.
    case dropAfterCommit
    /// The request reaches the server twice; the device gets the first answer.
    case duplicate
    /// The request reaches the device's server and, at the same moment, another instance
    /// (as when a load balancer retries it elsewhere while the first still runs); the
    /// device gets the answer that comes last. Only a POST is split; a link without
    /// another instance passes it.
    case split
}
