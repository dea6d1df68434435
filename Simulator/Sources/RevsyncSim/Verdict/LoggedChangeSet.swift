import RevsyncWire

/// One log entry as the content check reads it: whose it is and its author form.
public struct LoggedChangeSet: Sendable, Hashable {
    public var revision: Int64
    /// The device's public id, lowercased.
    public var device: String
    public var seq: Int64?
    /// `author_body`: with `seq`, and `__oldId__` on every created record.
    public var authorBody: ChangeSet

    public init(revision: Int64, device: String, seq: Int64?, authorBody: ChangeSet) {
        self.revision = revision
        self.device = device.lowercased()
        self.seq = seq
        self.authorBody = authorBody
    }
}
