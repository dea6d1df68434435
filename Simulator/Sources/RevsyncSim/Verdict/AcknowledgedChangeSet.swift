import RevsyncWire

/// A change set a device saw acknowledged, with what it had sent under that `seq`
/// in the request the acknowledgement answered: the content the log entry at
/// `revision` must hold.
public struct AcknowledgedChangeSet: Sendable, Hashable {
    /// The device's public id, lowercased.
    public var device: String
    public var seq: Int64
    /// The revision the acknowledgement carried.
    public var revision: Int64
    /// The change set as the device sent it (temporary ids, or permanent ones it had learnt by then).
    public var sent: ChangeSet

    public init(device: String, seq: Int64, revision: Int64, sent: ChangeSet) {
        self.device = device.lowercased()
        self.seq = seq
        self.revision = revision
        self.sent = sent
    }
}
