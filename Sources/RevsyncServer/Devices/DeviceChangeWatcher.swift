import Logging
import ServiceLifecycle

/// Keeps every instance's device cache honest and records when devices were last seen.
///
/// The instance that revokes a device, rotates its token or changes its role raises the
/// Redis device-change counter and publishes its new value, in one script
/// (`RedisChangeLog.publishDeviceChange`). Every instance hears it on its Redis subscription
/// (`CommitFeed`) and drops its whole cache at once. Messages published while a subscription
/// is down are lost, so the counter is read whenever the subscription starts (again), and
/// every `checkInterval` as well in case a subscription died without its connection saying
/// so. While the subscription is down or the counter cannot be read (Redis down or switched
/// off), cached devices live at most `fallbackMaxAge`, so a change still takes effect within
/// about that, at the price of one query per device per `fallbackMaxAge`.
///
/// Cached devices live until a change is heard only for `lease` from the sending of each
/// successful read of the counter (`DeviceCache.follow(until:)`). A Redis that stops
/// answering without closing the connection (a network partition) is known only when a call
/// times out, seconds later; meanwhile its subscription hears nothing and its reads wait. The
/// lease lapses by itself: a read sent after a change would have seen it, so a change still
/// takes effect within `lease` (one second by default, as `fallbackMaxAge`) of being made,
/// not the Redis command timeout later.
///
/// The announcement is one Redis call, made after the change committed; when it fails (the
/// instance that made the change could not reach Redis), an instance whose subscription is up
/// would keep its cached devices for good. So the change's own statement also raises a counter
/// in PostgreSQL, which `CacheReconciler` reads with the head every interval and hands on here
/// (`stored`): when it moves, the cache is dropped as for an announcement.
///
/// Before the subscription, the counter was polled every 250 ms: four Redis calls a second
/// on an idle instance, and a quarter of a second before a revocation took effect.
struct DeviceChangeWatcher: Service {
    /// What the subscription and the watcher's own timer tell it, in the order they happened.
    enum Event: Sendable {
        /// The subscription started (again): messages may have been missed before it.
        case subscribed
        /// Some device changed; the counter's new value.
        case changed(String)
        /// The subscription ended: messages are lost until the next `subscribed`.
        case lost
        /// `checkInterval` passed.
        case tick
        /// PostgreSQL's count of device changes, as the cache's reconciler read it.
        case stored(Int64)
    }

    /// The events of one run of the server. Older ones are dropped if the watcher falls far
    /// behind: any later one leads to the same state (a `changed` or a counter read), so the
    /// newest are kept.
    final class Events: Sendable {
        let stream: AsyncStream<Event>
        let continuation: AsyncStream<Event>.Continuation

        init() { (stream, continuation) = AsyncStream.makeStream(of: Event.self, bufferingPolicy: .bufferingNewest(64)) }
    }

    let devices: DeviceStore
    let feed: RedisChangeLog?
    let events: Events
    var checkInterval: Duration = .milliseconds(500)
    var fallbackMaxAge: Duration = .seconds(1)
    /// How long from the sending of a successful read of the counter cached devices may live
    /// until a change is heard: the next checks should renew it first, with room for slow
    /// reads. No shorter than `fallbackMaxAge`, which bounds a change's reach anyway; longer
    /// only with a check interval past two thirds of it.
    var lease: Duration { max(checkInterval * 3 / 2, fallbackMaxAge) }
    /// How often `last_seen_at` is written for the devices seen meanwhile.
    var seenFlushInterval: Duration = .seconds(30)
    let logger: Logger

    func run() async throws {
        await devices.cache.setMaxAge(fallbackMaxAge)
        let events = self.events, checkInterval = self.checkInterval
        await withDiscardingTaskGroup { group in
            group.addTask {
                while !Task.isCancelled {
                    try? await Task.sleep(for: checkInterval)
                    events.continuation.yield(.tick)
                }
            }
            // Apart from the checks: a write that waits on PostgreSQL must not let the lease lapse.
            group.addTask { await flushSeenPeriodically() }
            // Cancelling the loop ends the stream, and it with it.
            await cancelWhenGracefulShutdown { await watch(events.stream) }
            group.cancelAll()
        }
        try? await devices.flushSeen()
    }

    private func watch(_ events: AsyncStream<Event>) async {
        // The counter as last read or heard; nil when unknown.
        var version: String? = nil
        var subscribed = false
        // PostgreSQL's count as last read; nil before the first read.
        var stored: Int64? = nil
        for await event in events {
            switch event {
            case .changed(let value):
                await devices.cache.invalidateAll()
                version = value
            case .subscribed:
                subscribed = true
                version = await check(version, subscribed: true)
            case .stored(let value):
                // The first read drops the cache too: a change made before it may have been
                // announced while the subscription was not yet up (the cache is young then).
                if stored != value { await devices.cache.invalidateAll() }
                stored = value
            case .lost:
                subscribed = false
                await devices.cache.follow(until: nil)
            case .tick:
                version = await check(version, subscribed: subscribed)
            }
        }
    }

    /// Writes `last_seen_at` for the devices seen, every `seenFlushInterval`, until cancelled.
    private func flushSeenPeriodically() async {
        while !Task.isCancelled {
            try? await Task.sleep(for: seenFlushInterval)
            guard !Task.isCancelled else { return }
            do {
                try await devices.flushSeen()
            } catch {
                logger.debug("recording when devices were last seen failed", metadata: ["error": "\(error)"])
            }
        }
    }

    /// Reads the counter, drops the cache if it moved since `version`, and lets entries live
    /// until a change is heard, for `lease` from the read's sending (a reply that comes late
    /// speaks for when it was asked), only while changes are heard as they happen. Returns
    /// the counter read.
    private func check(_ version: String?, subscribed: Bool) async -> String? {
        guard let feed else { return nil }
        do {
            let asked = ContinuousClock.now
            let current = try await feed.deviceChangeVersion()
            if current != version { await devices.cache.invalidateAll() }
            await devices.cache.follow(until: subscribed ? asked + lease : nil)
            return current
        } catch {
            // The next readable counter may equal the one before the outage although
            // changes were announced meanwhile: start afresh from it.
            await devices.cache.follow(until: nil)
            return nil
        }
    }
}
