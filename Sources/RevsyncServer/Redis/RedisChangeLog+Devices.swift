import RevsyncRedis

/// The feed that tells every instance that some device's token or role changed: a
/// counter in Redis, raised by the instance that made the change, which publishes the new
/// value on a channel every instance follows (`DeviceChangeWatcher`).
extension RedisChangeLog {
    struct FeedUnavailable: Error, CustomStringConvertible {
        let description: String
    }

    /// The counter's current value ("0" when it was never raised or Redis was flushed).
    func deviceChangeVersion() async throws -> String {
        guard let keys = keys.withLock({ $0 }) else { throw FeedUnavailable(description: "the cache's keys are not known yet") }
        guard health.mayTry() else { throw FeedUnavailable(description: "Redis is unavailable") }
        do {
            let value = try await redis.get(keys.devices)
            health.succeeded()
            return value.map { String(buffer: $0) } ?? "0"
        } catch {
            health.failed(error)
            throw error
        }
    }

    /// Raises the counter and publishes its new value, in one script: a raised counter is
    /// always announced, and a follower that missed the message finds the counter moved.
    /// A failure is logged: the other instances then rely on PostgreSQL's count of device
    /// changes, which they read every second, and on their entries' short lifetime, which
    /// they use whenever they cannot read the counter. While Redis is down here it is not
    /// tried: the change would wait for a Redis cut off from this instance to time out.
    func publishDeviceChange() async {
        guard let keys = keys.withLock({ $0 }) else { return }
        guard health.isUp else {
            logger.warning("Redis is unavailable; a device change was not announced (the other instances learn it from PostgreSQL)")
            return
        }
        do {
            _ = try await redis.eval(script: Self.announceDeviceChangeScript, keys: [keys.devices], args: [keys.deviceChanges])
        } catch {
            health.failed(error)
            logger.warning("could not announce a device change on Redis", metadata: ["error": "\(error)"])
        }
    }

    static let announceDeviceChangeScript = """
        local value = redis.call('INCR', KEYS[1])
        redis.call('PUBLISH', ARGV[1], tostring(value))
        return value
        """
}
