/// Where a temporary id a device created points: the record's entity and the
/// permanent id the server gave it.
public struct TemporaryIdMapping: Sendable, Hashable {
    public let entity: String
    /// The permanent id.
    public let id: Int64

    public init(entity: String, id: Int64) {
        self.entity = entity
        self.id = id
    }
}
