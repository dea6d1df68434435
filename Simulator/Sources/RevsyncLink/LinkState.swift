import NIOCore
import Synchronization

/// The link's shared mutable state: connections on every event loop draw from
/// one generator and update one set of counters, so it sits behind a mutex.
final class LinkState: Sendable {
    private struct Inner {
        var rng: SplitMix64
        var stats = LinkStats()
        var offline = false
        var open: [ObjectIdentifier: any Channel] = [:]
        var scheduled: Scheduled<Void>?
        var shutDown = false
        var healed = false
    }

    let profile: LinkProfile
    /// The profile once healed: the same latency and bandwidth, no faults.
    private let healedProfile: LinkProfile
    private let inner: Mutex<Inner>
    private let onFate: (@Sendable (RequestFate) -> Void)?
    /// Whether a ``RequestFate/split`` has another instance to go to; without one it passes.
    private let canSplit: Bool

    init(profile: LinkProfile, seed: UInt64, canSplit: Bool = false, onFate: (@Sendable (RequestFate) -> Void)?) {
        self.profile = profile
        self.canSplit = canSplit
        var healedProfile = profile
        healedProfile.faults = .none
        healedProfile.offlineSchedule = nil
        self.healedProfile = healedProfile
        self.inner = Mutex(Inner(rng: SplitMix64(seed: seed)))
        self.onFate = onFate
    }

    /// Decides the next request's fate, or `nil` when the link is offline. Only a
    /// `splittable` request (a POST) is split, and only with another instance to go to.
    func decide(splittable: Bool = false) -> FateDecision? {
        let decision: FateDecision? = self.inner.withLock { inner in
            if inner.offline { return nil }
            var decision = FateDecision.draw(inner.healed ? self.healedProfile : self.profile, &inner.rng)
            if decision.fate == .split && !(self.canSplit && splittable) { decision.fate = .pass }
            inner.stats.fates[decision.fate, default: 0] += 1
            return decision
        }
        if let decision { self.onFate?(decision.fate) }
        return decision
    }

    /// Registers a new device connection; returns false (and counts a refusal)
    /// when the link is offline or shut down.
    func admit(_ channel: any Channel) -> Bool {
        self.inner.withLock { inner in
            if inner.offline || inner.shutDown {
                inner.stats.offlineRefusals += 1
                return false
            }
            inner.open[ObjectIdentifier(channel)] = channel
            return true
        }
    }

    func forget(_ channel: any Channel) {
        _ = self.inner.withLock { $0.open.removeValue(forKey: ObjectIdentifier(channel)) }
    }

    /// Sets the offline flag; says whether it changed, and going offline hands back
    /// the open connections to reset.
    func setOffline(_ offline: Bool) -> (changed: Bool, reset: [any Channel]) {
        self.inner.withLock { inner in
            if offline, inner.healed { return (false, []) }
            let wasOffline = inner.offline
            inner.offline = offline
            guard offline, !wasOffline else { return (wasOffline != offline, []) }
            let channels = Array(inner.open.values)
            inner.stats.offlineResets += channels.count
            return (true, channels)
        }
    }

    /// From now on: no faults, never offline. Hands back the pending schedule edge to
    /// cancel, and whether the link was offline until now.
    func heal() -> (scheduled: Scheduled<Void>?, wasOffline: Bool) {
        self.inner.withLock { inner in
            inner.healed = true
            let wasOffline = inner.offline
            inner.offline = false
            defer { inner.scheduled = nil }
            return (inner.scheduled, wasOffline)
        }
    }

    var isHealed: Bool { self.inner.withLock { $0.healed } }

    var isOffline: Bool { self.inner.withLock { $0.offline } }

    var stats: LinkStats { self.inner.withLock { $0.stats } }

    /// Keeps the pending offline-schedule edge so shutdown can cancel it;
    /// returns false once shut down so the schedule stops rearming.
    func setScheduled(_ task: Scheduled<Void>?) -> Bool {
        self.inner.withLock { inner in
            if inner.shutDown {
                task?.cancel()
                return false
            }
            inner.scheduled = task
            return true
        }
    }

    /// Marks the link shut down; hands back what must be closed and cancelled.
    func shutDown() -> (channels: [any Channel], scheduled: Scheduled<Void>?) {
        self.inner.withLock { inner in
            inner.shutDown = true
            defer { inner.scheduled = nil }
            return (Array(inner.open.values), inner.scheduled)
        }
    }
}
