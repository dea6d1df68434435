import NIOCore

/// How a committed change set is stored under one Redis key:
/// `[device id: 8 bytes][body length: 4 bytes][body][author body]`, big endian.
/// Both forms sit under one key so one MGET answers any device, and the response
/// is assembled from slices of the reply without parsing JSON.
enum CachedEntry {
    static func encode(_ entry: CommittedEntry) -> ByteBuffer {
        var buffer = ByteBufferAllocator().buffer(capacity: 12 + entry.body.readableBytes + entry.authorBody.readableBytes)
        buffer.writeInteger(entry.deviceId)
        buffer.writeInteger(UInt32(entry.body.readableBytes))
        var body = entry.body, author = entry.authorBody
        buffer.writeBuffer(&body)
        buffer.writeBuffer(&author)
        return buffer
    }

    /// nil for bytes that are not an entry (never written by this server).
    static func decode(_ value: ByteBuffer, revision: Int64) -> CommittedEntry? {
        var value = value
        guard let device = value.readInteger(as: Int64.self), let length = value.readInteger(as: UInt32.self),
            let body = value.readSlice(length: Int(length))
        else { return nil }
        return CommittedEntry(revision: revision, deviceId: device, body: body, authorBody: value)
    }
}

/// The Redis keys of one database's cache.
struct CacheKeys: Sendable {
    let prefix: String

    /// `<configured prefix>:<database instance id>`
    init(prefix: String, instance: String) { self.prefix = "\(prefix):\(instance)" }

    var head: String { prefix + ":head" }
    var horizon: String { prefix + ":horizon" }
    func entry(_ revision: Int64) -> String { prefix + ":e:" + String(revision) }
}
