import RevsyncWire

/// A request the contract's rules refuse: the error code of the envelope and what the
/// device should do about it. The rules decide it; the HTTP layer turns it into a status
/// and the `{"error", "message", …}` body.
public struct SyncRefusal: Error, Sendable, Hashable, CustomStringConvertible {
    public let code: ErrorCode
    public let message: String
    /// `sequence_gap` and `seq_reused`: the next seq the server expects.
    public var expected: Int64? = nil
    /// `seq_reused`: the lowest temporary id the device has used on the server.
    public var lowestTemporaryId: Int64? = nil
    /// `seq_reused`: the seq that named another change set.
    public var seq: Int64? = nil
    /// `unavailable`: when to try again.
    public var retryAfterSeconds: Int? = nil

    public init(_ code: ErrorCode, _ message: String, expected: Int64? = nil, retryAfterSeconds: Int? = nil) {
        self.code = code
        self.message = message
        self.expected = expected
        self.retryAfterSeconds = retryAfterSeconds
    }

    public var description: String { "\(code.rawValue): \(message)" }
}

extension SyncRefusal {
    /// A token whose device an administrator revoked.
    public static let deviceRevoked = SyncRefusal(.unauthorized, "this device was revoked: an administrator must register it again")
    /// A token whose device row is gone.
    public static let deviceGone = SyncRefusal(.unauthorized, "the device no longer exists")
}
