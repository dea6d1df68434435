/// Counters of what a ``FaultyLink`` has done so far.
public struct LinkStats: Sendable, Equatable {
    /// Requests whose fate was decided, by fate.
    public var fates: [RequestFate: Int] = [:]
    /// Connections closed on arrival because the link was offline.
    public var offlineRefusals = 0
    /// Open connections reset when the link went offline.
    public var offlineResets = 0

    /// Requests seen (one per decided fate).
    public var requests: Int { self.fates.values.reduce(0, +) }

    /// How many requests met `fate`.
    public func count(_ fate: RequestFate) -> Int { self.fates[fate, default: 0] }

    /// Requests that were not passed through cleanly.
    public var injectedFaults: Int { self.requests - self.count(.pass) }
}
