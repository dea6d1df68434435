import Crypto
import RevsyncDevice
import RevsyncWire

/// The state of one entity in a few bytes: how many records and a SHA-256 over
/// their canonical texts in id order. Two sides hold the same records exactly
/// when their digests are equal.
public struct EntityDigest: Sendable, Hashable, Codable, CustomStringConvertible {
    public var entity: String
    public var count: Int
    /// Lowercase hex.
    public var sha256: String

    public init(entity: String, count: Int, sha256: String) {
        self.entity = entity
        self.count = count
        self.sha256 = sha256
    }

    /// The digest of `records` (in any order: they are sorted by id first).
    public init(entity: String, attributes: [AttributeDescription], records: [DeviceRecord]) {
        var digester = EntityDigester(entity: entity, attributes: attributes)
        for record in records.sorted(by: { $0.id < $1.id }) { digester.add(record) }
        self = digester.finish()
    }

    public var description: String { "\(entity): \(count) records, sha256 \(sha256.prefix(12))…" }
}

/// Builds an `EntityDigest` one record at a time, so a large table can be
/// digested while it streams. Records must come in ascending id order.
public struct EntityDigester {
    public let entity: String
    let attributes: [AttributeDescription]
    private var hasher = SHA256()
    private var line = JSONWriter(capacity: 512)
    public private(set) var count = 0

    public init(entity: String, attributes: [AttributeDescription]) {
        self.entity = entity
        self.attributes = attributes
    }

    public mutating func add(_ record: DeviceRecord) {
        line = JSONWriter(capacity: 512)
        CanonicalRecord.write(record, attributes: attributes, to: &line)
        line.byte(UInt8(ascii: "\n"))
        hasher.update(data: line.bytes)
        count += 1
    }

    public func finish() -> EntityDigest {
        let hex = hasher.finalize().map { byte in
            let digits = String(byte, radix: 16)
            return byte < 16 ? "0" + digits : digits
        }.joined()
        return EntityDigest(entity: entity, count: count, sha256: hex)
    }
}
