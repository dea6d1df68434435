import RevsyncLink

/// How an instance cut from Redis came back: whether, after the heal, its Redis subscription
/// (the other instances' commits and device changes) was made anew, and how soon.
///
/// A subscription made before the cut may be alive (a reset closed it, a silent cut held its
/// bytes) or dead for good (a dropped path passes nothing ever again, and says nothing): only
/// one made after the cut began is known to hear. The server reports when its subscription last
/// started (`revsync_redis_subscribed_since_seconds`, Unix time, 0 while down).
public struct PartitionRecovery: Sendable, Equatable {
    public var instance: Int
    public var cut: TCPRelay.Cut
    /// Seconds from the heal until the instance reported a subscription started after the cut
    /// began; nil if it did not within ``PartitionRecovery/bound``.
    public var secondsAfterHeal: Double?
    /// The instance's process was replaced (killed, restarted) after the cut began and before it
    /// showed a new subscription: the new process subscribes afresh anyway, so the cut tells nothing.
    public var restarted: Bool

    public init(instance: Int, cut: TCPRelay.Cut, secondsAfterHeal: Double?, restarted: Bool = false) {
        self.instance = instance
        self.cut = cut
        self.secondsAfterHeal = secondsAfterHeal
        self.restarted = restarted
    }

    /// How long after the heal the soak looks: the server pings its subscription every second and
    /// gives Redis its command timeout (2 s) to answer, then tries again every second.
    public static let bound: Duration = .seconds(15)
    /// The server's metric of when its subscription last started.
    public static let metric = "revsync_redis_subscribed_since_seconds"
}
