/// How an instance's connections to PostgreSQL, made silent for good (`SilentFlows`: a NAT or
/// firewall that forgot them, an address moved by a failover), were given up: by the instance
/// (its TCP keep-alive and user timeout close them, and its pool opens new ones) and by
/// PostgreSQL (its backends end, and whatever their transactions held is released).
///
/// Without keep-alive neither end would know for a quarter of an hour (the instance, its kernel
/// retransmitting) or two hours (PostgreSQL, the system's keep-alive).
public struct SilentPathRecovery: Sendable, Equatable {
    public var instance: Int
    /// How many connections were made silent.
    public var connections: Int
    /// Seconds until none of them was open at the instance's end; nil if not within ``bound``.
    public var instanceClosedAfter: Double?
    /// Seconds until PostgreSQL had no backend left on them; nil if not within ``bound``.
    public var postgresEndedAfter: Double?
    /// The instance's process was replaced meanwhile: its connections went with it, which tells nothing.
    public var restarted: Bool

    public init(instance: Int, connections: Int, instanceClosedAfter: Double? = nil, postgresEndedAfter: Double? = nil, restarted: Bool = false) {
        self.instance = instance
        self.connections = connections
        self.instanceClosedAfter = instanceClosedAfter
        self.postgresEndedAfter = postgresEndedAfter
        self.restarted = restarted
    }

    /// How long the soak watches: the server's defaults (a probe after 5 s of silence, 10 s for
    /// unacknowledged bytes, at both ends) drop a silent connection within about 15 s.
    public static let bound: Duration = .seconds(30)
}
