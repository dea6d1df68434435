/// Why the server rejected a change set, carried by its corrective change set.
public struct ConflictReason: Sendable, Hashable, Codable {
    public enum Code: String, Sendable, Hashable, Codable, CaseIterable {
        /// The record changed since the revision the device sent.
        case staleRevision = "stale_revision"
        /// The record no longer exists.
        case notFound = "not_found"
        /// The device's role may not do this.
        case forbidden
        /// The change breaks the schema.
        case invalid
        /// A reference to a record or temporary id that does not exist, or a delete a reference prevents.
        case reference
    }

    public var code: Code
    public var entity: String?
    public var id: Int64?
    public var message: String

    public init(code: Code, entity: String?, id: Int64?, message: String) {
        self.code = code
        self.entity = entity
        self.id = id
        self.message = message
    }
}
