import NIOCore
import RevsyncGzip

/// A committed change set as Redis holds it, in five keys per revision:
///
/// | key | value |
/// | --- | --- |
/// | `p:<revision>` | `[device id: 8 bytes, big endian][public JSON]` |
/// | `o:<revision>` | `[device id][author JSON]` |
/// | `pzb:<revision>` | `[device id][JSON length: 4 bytes][CRC-32: 4 bytes][shape: 1 byte][landmark][public JSON as a deflate fragment]` (`writeFragment`) |
/// | `ozb:<revision>` | the same for the author's form |
/// | `pcb:<revision>` | `[device id][length][CRC-32][the dictionary's CRC-32: 4][the JSON's CRC-32: 4][shape][landmark][fragment]` (`ChainedFragment`) |
///
/// The public form is what every device gets; the author's (with `seq` and `__oldId__`)
/// is read only for the requester's own revisions. The compressed forms are made once,
/// here, and joined into gzip answers as they are. Every value starts with the author's
/// id, so a read picks the form without parsing, and the page limits count the JSON
/// length, which the compressed values carry. `pcb:` is the comma and the public JSON
/// compressed with the previous revision's public JSON as the dictionary: an answer sends
/// it right after that revision, and `pzb:` where anything else comes before. It is made
/// only where the previous revision's JSON is at hand; a read that finds none takes `pzb:`.
struct CachedEntry: Sendable {
    let entry: CommittedEntry
    let fragment: DeflateFragment
    let authorFragment: DeflateFragment
    let chained: ChainedFragment?

    /// Compresses both forms (at commit, or when PostgreSQL fills a hole), and the chained
    /// form when the previous revision's public JSON is given. Entries compressed one after
    /// another should share a `deflater`.
    init(_ entry: CommittedEntry, previous: ByteBuffer? = nil, with deflater: Deflater = Deflater()) {
        self.entry = entry
        let fragment = DeflateFragment(compressing: entry.body, with: deflater).marked(.lastRevision(in: entry.body))
        self.fragment = fragment
        authorFragment = DeflateFragment(compressing: entry.authorBody, with: deflater).marked(.lastRevision(in: entry.authorBody))
        chained = previous.map { ChainedFragment(entry.body, after: $0, tail: fragment.crc, with: deflater) }
    }

    /// What `device` receives of this entry, in `form`.
    func logEntry(for deviceId: Int64, form: EntryForm) -> LogEntry {
        let own = deviceId == entry.deviceId
        switch form {
        case .plain: return LogEntry(revision: entry.revision, body: .plain(own ? entry.authorBody : entry.body))
        case .deflated: return LogEntry(revision: entry.revision, body: .deflated(own ? authorFragment : fragment))
        }
    }

    /// The values that cache this entry, each with its slot.
    func values() -> [CacheValue] {
        let revision = entry.revision
        return [
            CacheValue(slot: .entry(revision), value: Self.plainValue(entry.deviceId, entry.body)),
            CacheValue(slot: .author(revision), value: Self.plainValue(entry.deviceId, entry.authorBody)),
            CacheValue(slot: .deflated(revision), value: Self.deflatedValue(entry.deviceId, fragment)),
            CacheValue(slot: .authorDeflated(revision), value: Self.deflatedValue(entry.deviceId, authorFragment)),
        ] + (chained.map { [CacheValue(slot: .chained(revision), value: $0.value(prefix: Self.devicePrefix(entry.deviceId)))] } ?? [])
    }

    /// The SET commands that cache this entry.
    func setCommands(keys: CacheKeys) -> [[ByteBuffer]] { values().map { $0.setCommand(keys) } }

    /// The bytes the five values take in Redis (for the window's byte budget).
    var cachedBytes: Int {
        entry.body.readableBytes + entry.authorBody.readableBytes + fragment.cachedBytes + authorFragment.cachedBytes
            + (chained.map { $0.fragment.cachedBytes + 8 } ?? 0) + 5 * 8
    }

    static func devicePrefix(_ deviceId: Int64) -> ByteBuffer {
        var buffer = ByteBufferAllocator().buffer(capacity: 8)
        buffer.writeInteger(deviceId)
        return buffer
    }

    static func plainValue(_ deviceId: Int64, _ body: ByteBuffer) -> ByteBuffer {
        var buffer = ByteBufferAllocator().buffer(capacity: 8 + body.readableBytes)
        buffer.writeInteger(deviceId)
        var body = body
        buffer.writeBuffer(&body)
        return buffer
    }

    static func deflatedValue(_ deviceId: Int64, _ fragment: DeflateFragment) -> ByteBuffer {
        var buffer = devicePrefix(deviceId)
        buffer.writeFragment(fragment)
        return buffer
    }

    /// The author and the body of a cached value in `form`; nil for bytes this server never wrote.
    static func decode(_ value: ByteBuffer, form: EntryForm) -> (device: Int64, body: LogEntry.Body)? {
        var value = value
        guard let device = value.readInteger(as: Int64.self) else { return nil }
        switch form {
        case .plain:
            return (device, .plain(value))
        case .deflated:
            guard let (fragment, _) = value.readFragment(chained: false) else { return nil }
            return (device, .deflated(fragment))
        }
    }

    /// The author and the fragment of a `pcb:` value.
    static func decodeChained(_ value: ByteBuffer) -> (device: Int64, chained: ChainedFragment)? {
        var value = value
        guard let device = value.readInteger(as: Int64.self), let chained = ChainedFragment.decode(&value) else { return nil }
        return (device, chained)
    }

    /// The author and the public JSON of a `p:` value.
    static func decodePublic(_ value: ByteBuffer) -> (device: Int64, body: ByteBuffer)? {
        guard case .some((let device, .plain(let body))) = decode(value, form: .plain) else { return nil }
        return (device, body)
    }
}

/// The Redis keys of one database's cache.
package struct CacheKeys: Sendable {
    package let prefix: String

    /// `<configured prefix>:<database instance id>`
    package init(prefix: String, instance: String) { self.prefix = "\(prefix):\(instance)" }

    package var head: String { prefix + ":head" }
    package var horizon: String { prefix + ":horizon" }
    /// A counter raised whenever a device is revoked, rotated or changes role.
    var devices: String { prefix + ":devices" }
    /// The channel the counter's new values are published on.
    var deviceChanges: String { prefix + ":device-changes" }
    /// The channel every instance publishes its new heads on (long-poll wake-ups).
    package var commits: String { prefix + ":commits" }
    /// The public JSON. (Before pre-compressed entries these were `e:` and `a:`, values in
    /// another layout: the new names keep an older server's values from being misread.)
    package func entry(_ revision: Int64) -> String { entryPrefix + String(revision) }
    /// What every public entry's key starts with (a script that reads the entry at the head).
    var entryPrefix: String { prefix + ":p:" }
    package func author(_ revision: Int64) -> String { prefix + ":o:" + String(revision) }
    /// The compressed forms. (Before fragments were joined at the bit these were `pz:`, `oz:`,
    /// `pc:`, `r<n>:` and `rc<n>:`, without the shape byte: the new names keep an older
    /// server's values from being misread, and from being joined by it.)
    package func deflated(_ revision: Int64) -> String { prefix + ":pzb:" + String(revision) }
    package func authorDeflated(_ revision: Int64) -> String { prefix + ":ozb:" + String(revision) }
    /// The public form compressed after the previous revision's (`ChainedFragment`).
    package func chained(_ revision: Int64) -> String { prefix + ":pcb:" + String(revision) }
    /// Run `index` of `size` revisions (`CachedRun`).
    package func run(_ size: Int64, _ index: Int64) -> String { prefix + ":rb" + String(size) + ":" + String(index) }
    /// The same run compressed after the revision before it (`ChainedFragment`).
    package func chainedRun(_ size: Int64, _ index: Int64) -> String { prefix + ":rcb" + String(size) + ":" + String(index) }
    /// Every key of one revision.
    func all(_ revision: Int64) -> [String] { [entry(revision), author(revision), deflated(revision), authorDeflated(revision), chained(revision)] }
}

/// One value the cache sets, and which it is.
struct CacheValue: Sendable {
    let slot: CacheSlot
    let value: ByteBuffer

    /// The Redis command that sets it.
    func setCommand(_ keys: CacheKeys) -> [ByteBuffer] { [ByteBuffer(string: "SET"), ByteBuffer(string: keys.key(slot)), value] }
}
