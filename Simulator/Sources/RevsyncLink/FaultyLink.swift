import Logging
import NIOCore
import NIOHTTP1
import NIOPosix

/// A seeded, fault-injecting HTTP/1.1 proxy on 127.0.0.1 that stands between
/// one virtual device (or one link profile) and the server.
///
/// Each request's fate is drawn from a generator seeded with `seed`, so the
/// same seed and the same request sequence give the same faults. Point the
/// device at ``port``; the link forwards to the target host and port.
public final class FaultyLink: Sendable {
    /// The local port the link listens on (127.0.0.1).
    public let port: Int
    /// The profile the link was started with.
    public let profile: LinkProfile
    /// The seed every fault and delay is drawn from.
    public let seed: UInt64

    private let state: LinkState
    private let serverChannel: any Channel
    private let logger: Logger
    private let onOfflineChange: (@Sendable (Bool) -> Void)?

    /// Starts a link listening on 127.0.0.1 with an ephemeral port.
    ///
    /// - Parameters:
    ///   - profile: Delays, bandwidth and fault odds.
    ///   - seed: Seeds the per-request draws and the offline schedule.
    ///   - targetHost: Where the server listens.
    ///   - targetPort: The server's port.
    ///   - splitTargetPort: Another instance of the server, where a ``RequestFate/split``
    ///     request goes too; without it such a request passes.
    ///   - group: Event loops for both sides of every proxied connection.
    ///   - logger: Routine events go out at debug.
    ///   - onFate: Called with every request's fate as it is decided (for
    ///     logs and replay checks); it runs on an event loop, so keep it short.
    ///   - onSplit: Called with every split request and both its answers, once the second
    ///     has come; it runs on an event loop, so keep it short.
    ///   - onOfflineChange: Called with `true` when the link goes offline and `false`
    ///     when it comes back (a scheduled window, `setOffline`, `heal`), as it
    ///     happens; it may run on an event loop, so keep it short.
    public init(
        profile: LinkProfile,
        seed: UInt64,
        targetHost: String = "127.0.0.1",
        targetPort: Int,
        splitTargetPort: Int? = nil,
        group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        logger: Logger = Logger(label: "revsync.link"),
        onFate: (@Sendable (RequestFate) -> Void)? = nil,
        onSplit: (@Sendable (SplitExchange) -> Void)? = nil,
        onOfflineChange: (@Sendable (Bool) -> Void)? = nil
    ) async throws {
        let state = LinkState(profile: profile, seed: seed, canSplit: splitTargetPort != nil, onFate: onFate)
        let targets = LinkTargets(host: targetHost, port: targetPort, splitPort: splitTargetPort, onSplit: onSplit)
        let channel = try await ServerBootstrap(group: group)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline(withErrorHandling: true)
                    try channel.pipeline.syncOperations.addHandler(
                        LinkConnectionHandler(state: state, targets: targets, logger: logger)
                    )
                }
            }
            .bind(host: "127.0.0.1", port: 0)
            .get()
        guard let port = channel.localAddress?.port else {
            try? await channel.close()
            throw LinkError.noLocalPort
        }
        self.port = port
        self.profile = profile
        self.seed = seed
        self.state = state
        self.serverChannel = channel
        self.logger = logger
        self.onOfflineChange = onOfflineChange
        logger.debug(
            "link listening",
            metadata: ["port": "\(port)", "target": "\(targetHost):\(targetPort)", "seed": "\(seed)"]
        )
        if let schedule = profile.offlineSchedule {
            self.armOfflineSchedule(schedule, rng: SplitMix64(seed: self.offlineSeed), loop: channel.eventLoop)
        }
    }

    /// Counters of the faults injected so far.
    public func stats() -> LinkStats {
        self.state.stats
    }

    /// Whether the link is currently offline.
    public var isOffline: Bool {
        self.state.isOffline
    }

    /// Takes the link offline (new connections are refused, open ones reset)
    /// or back online. A scheduled window overrides this at its next edge.
    public func setOffline(_ offline: Bool) {
        let (changed, toReset) = self.state.setOffline(offline)
        self.logger.debug("link offline changed", metadata: ["offline": "\(offline)", "reset": "\(toReset.count)"])
        if changed { self.onOfflineChange?(offline) }
        for channel in toReset {
            resetConnection(channel)
        }
    }

    /// Ends every fault for good: the link goes online, stops its offline
    /// schedule and passes every request cleanly (latency and bandwidth stay).
    /// The soak heals its links before draining the devices.
    public func heal() {
        let (scheduled, wasOffline) = self.state.heal()
        scheduled?.cancel()
        if wasOffline { self.onOfflineChange?(false) }
        self.logger.debug("link healed")
    }

    /// Whether `heal()` was called.
    public var isHealed: Bool {
        self.state.isHealed
    }

    /// The first `count` scheduled offline windows (start after the link
    /// started, length), or none when the profile has no schedule.
    public func plannedOfflineWindows(count: Int) -> [(start: Duration, length: Duration)] {
        self.profile.offlineSchedule?.windows(count: count, seed: self.offlineSeed) ?? []
    }

    /// Stops listening, resets open connections and cancels the offline schedule.
    public func shutdown() async throws {
        let (channels, scheduled) = self.state.shutDown()
        scheduled?.cancel()
        for channel in channels {
            channel.close(promise: nil)
        }
        try await self.serverChannel.close()
    }

    /// The schedule draws from its own stream so toggling it on or off does not
    /// shift the per-request faults of the same seed.
    private var offlineSeed: UInt64 {
        self.seed ^ 0x6F66_666C_696E_6521
    }

    private func armOfflineSchedule(_ schedule: OfflineSchedule, rng: SplitMix64, loop: any EventLoop) {
        var rng = rng
        let (up, down) = schedule.nextSpell(using: &rng)
        let next = rng
        let goOffline = loop.scheduleTask(in: TimeAmount(up)) {
            self.setOffline(true)
            let comeBack = loop.scheduleTask(in: TimeAmount(down)) {
                self.setOffline(false)
                self.armOfflineSchedule(schedule, rng: next, loop: loop)
            }
            _ = self.state.setScheduled(comeBack)
        }
        _ = self.state.setScheduled(goOffline)
    }
}

/// Errors from starting a ``FaultyLink``.
public enum LinkError: Error, Sendable {
    /// The listening socket reported no port.
    case noLocalPort
}
