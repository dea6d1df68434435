/// The run's state at one moment, as the progress line shows it while the soak runs.
public struct ProgressSnapshot: Sendable, Equatable {
    /// Seconds since the workload started.
    public var elapsedSeconds: Double
    /// `seeding`, `bootstrap`, `workload`, `heal`, `drain`, `verdict`, …
    public var phase: String
    public var online: Int
    public var offline: Int
    /// Change sets in all devices' outboxes.
    public var pending: Int
    public var headRevision: Int64
    /// Cumulative.
    public var conflicts: Int
    /// Cumulative failed sync rounds and retries.
    public var errors: Int
    /// Cumulative change sets acknowledged by the server.
    public var acknowledged: Int

    public init(
        elapsedSeconds: Double, phase: String, online: Int, offline: Int, pending: Int, headRevision: Int64,
        conflicts: Int, errors: Int, acknowledged: Int
    ) {
        self.elapsedSeconds = elapsedSeconds
        self.phase = phase
        self.online = online
        self.offline = offline
        self.pending = pending
        self.headRevision = headRevision
        self.conflicts = conflicts
        self.errors = errors
        self.acknowledged = acknowledged
    }
}
