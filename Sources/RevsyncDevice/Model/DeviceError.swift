import RevsyncRules

/// Errors of the device engine itself (the server's are `SyncTransportError`).
public enum DeviceError: Error, Sendable, Hashable, CustomStringConvertible {
    /// No device token yet: call `register(_:adminToken:)` or `useToken(_:deviceId:)`.
    case notRegistered
    /// No schema and data yet: call `bootstrap()` (or `syncOnce()`, which bootstraps a new device).
    case notBootstrapped
    /// The schema from the server cannot be used (bad names, unknown referenced entity).
    case invalidSchema(String)
    case unknownEntity(String)
    case unknownAttribute(entity: String, attribute: String)
    /// A value of the wrong type, or null where the schema forbids it.
    case invalidValue(entity: String, attribute: String, message: String)
    case missingAttribute(entity: String, attribute: String)
    /// The device's role may not do this (the schema's permissions).
    case forbidden(entity: String, operation: String)
    case recordNotFound(entity: String, id: Int64)
    /// A reference attribute names a record the device does not have.
    case referenceNotFound(entity: String, attribute: String, id: Int64)
    /// A delete refused by an on-delete-restrict reference.
    case restricted(entity: String, id: Int64, referencedBy: RecordKey, attribute: String)
    /// An edit the engine cannot express as one valid change set.
    case unsupportedEdit(String)
    /// A transaction made more creates, updates and deletes than one change set may
    /// hold (`SyncEngineConfiguration.maxOperationsPerChangeSet`); nothing of it is kept.
    case tooManyOperations(count: Int, limit: Int)
    /// A transaction's change set is more bytes of JSON than one may be
    /// (`SyncEngineConfiguration.maxChangeSetBytes`); nothing of it is kept.
    case changeSetTooManyBytes(bytes: Int, limit: Int)
    /// The server answered without acknowledging or rejecting change sets it was sent.
    case unansweredChangeSets([Int64])
    /// The server's response names entities or attributes its schema does not have.
    case unknownNamesInResponse([String])
    /// The engine was closed.
    case closed

    public var description: String {
        switch self {
        case .notRegistered: "the device has no token: register it or give it a token"
        case .notBootstrapped: "the device has no data yet: bootstrap it from the server's snapshot"
        case .invalidSchema(let message): "unusable schema: \(message)"
        case .unknownEntity(let name): "unknown entity \"\(name)\""
        case .unknownAttribute(let entity, let attribute): "unknown attribute \"\(attribute)\" of \(entity)"
        case .invalidValue(let entity, let attribute, let message): "attribute \"\(attribute)\" of \(entity): \(message)"
        case .missingAttribute(let entity, let attribute): "missing required attribute \"\(attribute)\" of \(entity)"
        case .forbidden(let entity, let operation): "this device's role may not \(operation) \(entity)"
        case .recordNotFound(let entity, let id): "\(entity) \(id) does not exist on this device"
        case .referenceNotFound(let entity, let attribute, let id):
            "attribute \"\(attribute)\" of \(entity) references \(id), which does not exist on this device"
        case .restricted(let entity, let id, let child, let attribute):
            "\(entity) \(id) cannot be deleted: \(child) references it through \"\(attribute)\" (on delete restrict)"
        case .unsupportedEdit(let message): message
        case .tooManyOperations(let count, let limit):
            "the transaction makes \(count) creates, updates and deletes; one change set may hold \(limit): split the work into several transactions"
        case .changeSetTooManyBytes(let bytes, let limit):
            "the transaction's change set is \(bytes) bytes of JSON; one may be at most \(limit): keep large values (files, images) out of records, or split the work into several transactions"
        case .unansweredChangeSets(let seqs): "the server neither acknowledged nor rejected change sets \(seqs)"
        case .unknownNamesInResponse(let names): "the response names \(names.joined(separator: ", ")), unknown to the server's schema"
        case .closed: "the sync engine is closed"
        }
    }
}
