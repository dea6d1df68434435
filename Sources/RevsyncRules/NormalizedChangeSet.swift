import RevsyncWire

/// A new record: every attribute of its entity, with defaults filled in.
public struct CreateOperation: Sendable, Hashable {
    public let entity: String
    public let temporaryId: Int64
    /// All attributes; references may hold temporary ids until ids are allocated.
    public var values: Attributes
}

/// Changed attributes of an existing record, on top of the revision the device saw.
public struct UpdateOperation: Sendable, Hashable {
    public let entity: String
    /// The id as the device sent it; a permanent id once resolved.
    public var id: Int64
    public let basis: Int64
    public var values: Attributes
}

/// The removal of a record the device saw at `basis`.
public struct DeleteOperation: Sendable, Hashable {
    public let entity: String
    public var id: Int64
    public let basis: Int64
}

/// A change set that passed the schema and permission checks, in a normal form.
public struct NormalizedChangeSet: Sendable, Hashable {
    public var seq: Int64?
    public var types: [String]
    public var creates: [CreateOperation]
    public var updates: [UpdateOperation]
    public var deletes: [DeleteOperation]
    /// Temporary ids created here, with their entity.
    public var createdHere: [Int64: String]
    /// Temporary ids used here but created earlier, with the entity each must be.
    public var temporaryIdsToResolve: [Int64: String]
}
