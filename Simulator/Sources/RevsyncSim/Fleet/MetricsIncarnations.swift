/// Catch-up histograms of server instances across their incarnations.
///
/// A server process counts from zero when it starts, so a killed instance takes its
/// counts with it. The last scrape of each incarnation is kept when the incarnation
/// ends (``retire(instance:)``), and the next incarnation's scrapes add to it.
public struct MetricsIncarnations: Sendable, Equatable {
    /// Everything counted by incarnations that have ended.
    private var retired = BucketHistogram()
    /// The latest scrape of each instance's running incarnation.
    private var current: [Int: ServerMetricsSnapshot] = [:]
    /// The highest head revision any scrape reported (the head only grows, and a
    /// restarted instance reports 0 until it serves a request).
    public private(set) var headRevision: Int64?

    public init() {}

    /// Takes the latest scrape of `instance`'s running incarnation.
    ///
    /// If its count went down, the process restarted without ``retire(instance:)`` being
    /// called; the previous scrape is retired first so its counts are not lost.
    public mutating func record(instance: Int, _ snapshot: ServerMetricsSnapshot) {
        if let previous = current[instance], snapshot.catchUp.count < previous.catchUp.count {
            retired.add(previous.catchUp)
        }
        current[instance] = snapshot
        if let head = snapshot.headRevision { headRevision = Swift.max(headRevision ?? head, head) }
    }

    /// `instance`'s incarnation has ended: keep its last counts, expect the next one to start at zero.
    public mutating func retire(instance: Int) {
        if let last = current.removeValue(forKey: instance) { retired.add(last.catchUp) }
    }

    /// All incarnations of all instances.
    public var catchUp: BucketHistogram {
        current.values.reduce(retired) { $0 + $1.catchUp }
    }
}
