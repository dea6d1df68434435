import Logging
import ServiceLifecycle

/// Keeps every instance's device cache honest and records when devices were last seen.
///
/// It polls the Redis device-change counter every `pollInterval` and drops the whole
/// cache when the counter moves, so a revocation, token rotation or role change made
/// on any instance takes effect everywhere within about one poll. While the counter
/// cannot be read (Redis down or switched off), cached devices live at most
/// `fallbackMaxAge`, so the same holds at the price of one query per device per
/// `fallbackMaxAge`.
struct DeviceChangeWatcher: Service {
    let devices: DeviceStore
    let feed: RedisChangeLog?
    var pollInterval: Duration = .milliseconds(250)
    var fallbackMaxAge: Duration = .seconds(1)
    /// How often `last_seen_at` is written for the devices seen meanwhile.
    var seenFlushInterval: Duration = .seconds(30)
    let logger: Logger

    func run() async throws {
        var version: String? = nil
        var lastFlush = ContinuousClock.now
        await devices.cache.setMaxAge(fallbackMaxAge)
        while !Task.isShuttingDownGracefully && !Task.isCancelled {
            try? await cancelWhenGracefulShutdown { try await Task.sleep(for: pollInterval) }
            guard !Task.isShuttingDownGracefully, !Task.isCancelled else { break }
            if let feed {
                do {
                    let current = try await feed.deviceChangeVersion()
                    if current != version {
                        await devices.cache.invalidateAll()
                        version = current
                    }
                    await devices.cache.setMaxAge(nil)
                } catch {
                    // The next readable counter may equal the one before the outage although
                    // changes were announced meanwhile: start afresh from it.
                    version = nil
                    await devices.cache.setMaxAge(fallbackMaxAge)
                }
            }
            if ContinuousClock.now - lastFlush >= seenFlushInterval {
                lastFlush = ContinuousClock.now
                do {
                    try await devices.flushSeen()
                } catch {
                    logger.debug("recording when devices were last seen failed", metadata: ["error": "\(error)"])
                }
            }
        }
        try? await devices.flushSeen()
    }
}
