import RevsyncWire

/// One record of one entity as the device sees it: the server's data with the
/// device's pending local changes on top.
public struct DeviceRecord: Sendable, Hashable, Codable {
    /// Positive once the server has assigned it; negative (a temporary id) for a
    /// record created on this device and not acknowledged yet.
    public var id: Int64
    /// The revision of the change set that last wrote the record on the server, as
    /// last received; 0 for a record created locally and not acknowledged yet.
    /// Local edits do not change it: it is the basis sent with updates and deletes.
    public var revision: Int64
    /// Every attribute of the entity (absent values are `.null`).
    public var attributes: Attributes

    public init(id: Int64, revision: Int64, attributes: Attributes) {
        self.id = id
        self.revision = revision
        self.attributes = attributes
    }

    /// The value of attribute `name`, nil when the entity has no such attribute.
    public subscript(_ name: String) -> JSONValue? { attributes[name] }

    /// Whether the id is still a temporary one.
    public var isTemporary: Bool { id < 0 }
}

/// A temporary id the server replaced by a permanent one.
public struct IdMapping: Sendable, Hashable, Codable {
    public var entity: String
    public var temporaryId: Int64
    public var permanentId: Int64

    public init(entity: String, temporaryId: Int64, permanentId: Int64) {
        self.entity = entity
        self.temporaryId = temporaryId
        self.permanentId = permanentId
    }
}
