/// A record by entity and id (permanent when positive, a device's temporary id when negative).
public struct RecordKey: Sendable, Hashable, Comparable, Codable, CustomStringConvertible {
    public let entity: String
    public let id: Int64

    public init(_ entity: String, _ id: Int64) {
        self.entity = entity
        self.id = id
    }

    public static func < (lhs: RecordKey, rhs: RecordKey) -> Bool {
        (lhs.entity, lhs.id) < (rhs.entity, rhs.id)
    }

    public var description: String { "\(entity) \(id)" }
}
