/// The body of `POST /sync`.
public struct SyncRequest: Sendable, Hashable, Codable {
    /// The revision the device has fully applied (0 for a new device).
    public var maxRevision: Int64
    /// The device's pending change sets, oldest first.
    public var changeSets: [ChangeSet]

    public init(maxRevision: Int64, changeSets: [ChangeSet] = []) {
        self.maxRevision = maxRevision
        self.changeSets = changeSets
    }
}

/// The body of a `POST /sync` response, and of `GET /snapshot`.
public struct SyncResponse: Sendable, Hashable, Codable {
    /// The highest revision the device now has every change set up to.
    public var maxRevision: Int64
    /// Catch-up and acknowledged change sets in revision order, then corrective sets.
    public var changeSets: [ChangeSet]
    /// `true` when the catch-up was cut by a limit: call again.
    public var more: Bool?

    public init(maxRevision: Int64, changeSets: [ChangeSet] = [], more: Bool? = nil) {
        self.maxRevision = maxRevision
        self.changeSets = changeSets
        self.more = more
    }
}

/// The body of `POST /devices`.
public struct DeviceRegistration: Sendable, Hashable, Codable {
    public var name: String
    public var user: String
    public var role: String

    public init(name: String, user: String, role: String) {
        self.name = name
        self.user = user
        self.role = role
    }
}

/// The answer to `POST /devices`.
public struct RegisteredDevice: Sendable, Hashable, Codable {
    public var deviceId: String
    public var token: String

    public init(deviceId: String, token: String) {
        self.deviceId = deviceId
        self.token = token
    }
}

/// The body of every error response: `{"error": code, "message": …}`.
public struct ErrorBody: Sendable, Hashable, Codable {
    public var error: String
    public var message: String
    /// The next `seq` the server expects (`sequence_gap` only).
    public var expected: Int64?

    public init(error: String, message: String, expected: Int64? = nil) {
        self.error = error
        self.message = message
        self.expected = expected
    }
}
