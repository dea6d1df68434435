import NIOCore

/// How a committed change set is stored in Redis: `e:<revision>` holds
/// `[device id: 8 bytes, big endian][body]`, the form every device gets, and
/// `a:<revision>` the author's form, read only for the requester's own revisions.
/// A catch-up thus moves each change set once, and the response is assembled from
/// slices of the reply without parsing JSON.
enum CachedEntry {
    static func encodePublic(_ entry: CommittedEntry) -> ByteBuffer {
        var buffer = ByteBufferAllocator().buffer(capacity: 8 + entry.body.readableBytes)
        buffer.writeInteger(entry.deviceId)
        var body = entry.body
        buffer.writeBuffer(&body)
        return buffer
    }

    /// The author and the public body; nil for bytes this server never wrote.
    static func decodePublic(_ value: ByteBuffer) -> (device: Int64, body: ByteBuffer)? {
        var value = value
        guard let device = value.readInteger(as: Int64.self) else { return nil }
        return (device, value)
    }

    /// The SET commands that cache `entry`.
    static func setCommands(_ entry: CommittedEntry, keys: CacheKeys) -> [[ByteBuffer]] {
        [
            [ByteBuffer(string: "SET"), ByteBuffer(string: keys.entry(entry.revision)), encodePublic(entry)],
            [ByteBuffer(string: "SET"), ByteBuffer(string: keys.author(entry.revision)), entry.authorBody],
        ]
    }
}

/// The Redis keys of one database's cache.
struct CacheKeys: Sendable {
    let prefix: String

    /// `<configured prefix>:<database instance id>`
    init(prefix: String, instance: String) { self.prefix = "\(prefix):\(instance)" }

    var head: String { prefix + ":head" }
    var horizon: String { prefix + ":horizon" }
    /// A counter raised whenever a device is revoked, rotated or changes role.
    var devices: String { prefix + ":devices" }
    func entry(_ revision: Int64) -> String { prefix + ":e:" + String(revision) }
    func author(_ revision: Int64) -> String { prefix + ":a:" + String(revision) }
}
