/// A temporary id the device gave up for a new one, because the server had
/// already mapped it to another record of the same device (see
/// `ReusedSeqRepair`): the record is now found under `to`.
public struct TemporaryIdRename: Sendable, Hashable, Codable {
    public var entity: String
    public var from: Int64
    public var to: Int64

    public init(entity: String, from: Int64, to: Int64) {
        self.entity = entity
        self.from = from
        self.to = to
    }
}
