/// The body of `POST /sync`.
public struct SyncRequest: Sendable, Hashable, Codable {
    /// The revision the device has fully applied (0 for a new device).
    public var maxRevision: Int64
    /// The device's pending change sets, oldest first.
    public var changeSets: [ChangeSet]
    /// Seconds the server may hold a request without change sets until something is
    /// committed after `maxRevision` (long-poll); nil or 0 answers at once. The server
    /// clamps it to its maximum (`REVSYNC_MAX_WAIT_SECONDS`).
    public var wait: Double?
    /// The database's history id as the device last received it (every answer and snapshot
    /// carries it): a server whose database went back since refuses the request with
    /// `409 history_changed`, and the device loads a new snapshot. Nil: not checked.
    public var history: String?

    public init(maxRevision: Int64, changeSets: [ChangeSet] = [], wait: Double? = nil, history: String? = nil) {
        self.maxRevision = maxRevision
        self.changeSets = changeSets
        self.wait = wait
        self.history = history
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
    /// The database's history id: it changes when the database goes back (restored from a
    /// backup, or failed over with commits lost), and the revisions of an earlier one are not
    /// this database's. The device keeps it and sends it with every request.
    public var history: String?
    /// In a snapshot (`GET /snapshot`) only: the requesting device's last seq the server had
    /// handled, read with the records. Its change sets through it are in them, so pending ones
    /// among them (sent, their answer lost) are not replayed over them.
    public var lastSeq: Int64?

    public init(maxRevision: Int64, changeSets: [ChangeSet] = [], more: Bool? = nil, history: String? = nil, lastSeq: Int64? = nil) {
        self.maxRevision = maxRevision
        self.changeSets = changeSets
        self.more = more
        self.history = history
        self.lastSeq = lastSeq
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
    /// The next `seq` the server expects (`sequence_gap` and `seq_reused`).
    public var expected: Int64?
    /// The lowest temporary id the server has mapped for this device, 0 for none
    /// (`seq_reused`): a restored device moves its new temporary ids below it.
    public var lowestTemporaryId: Int64?
    /// The first seq of the request that named a different change set before (`seq_reused`):
    /// the device renumbers from this one on; earlier ones were true retries.
    public var seq: Int64?

    public init(error: String, message: String, expected: Int64? = nil, lowestTemporaryId: Int64? = nil, seq: Int64? = nil) {
        self.error = error
        self.message = message
        self.expected = expected
        self.lowestTemporaryId = lowestTemporaryId
        self.seq = seq
    }
}

/// The answer to `GET /devices/me` (the calling device) and one row of `GET /devices` (admin).
public struct DeviceInfo: Sendable, Hashable, Codable {
    public var deviceId: String
    public var name: String
    public var user: String
    public var role: String
    /// When the device was registered (ISO 8601, UTC).
    public var created: String
    /// The last time the server saw a request with the device's token (ISO 8601, UTC; nil: never),
    /// within a minute: each instance writes the devices it served every 30 s.
    public var lastSeen: String?
    /// The highest `seq` the server has handled for the device (0: none).
    public var lastSeq: Int64
    /// The lowest temporary id the server has mapped for the device (0: none).
    public var lowestTemporaryId: Int64
    /// When the device was revoked (admin listing only; nil while it is active).
    public var revoked: String?

    public init(
        deviceId: String, name: String, user: String, role: String, created: String, lastSeen: String?,
        lastSeq: Int64, lowestTemporaryId: Int64, revoked: String? = nil
    ) {
        self.deviceId = deviceId
        self.name = name
        self.user = user
        self.role = role
        self.created = created
        self.lastSeen = lastSeen
        self.lastSeq = lastSeq
        self.lowestTemporaryId = lowestTemporaryId
        self.revoked = revoked
    }
}

/// The body of `PATCH /devices/{id}` (admin).
public struct DeviceUpdate: Sendable, Hashable, Codable {
    public var role: String

    public init(role: String) { self.role = role }
}

/// The answer to `GET /devices` (admin).
public struct DeviceList: Sendable, Hashable, Codable {
    public var devices: [DeviceInfo]

    public init(devices: [DeviceInfo]) { self.devices = devices }
}
