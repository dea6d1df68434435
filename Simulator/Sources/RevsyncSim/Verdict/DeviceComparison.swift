/// One entity whose digest on one device is not PostgreSQL's.
public struct DigestMismatch: Sendable, Hashable, Codable {
    public var device: String
    public var entity: String
    /// nil when the device's records could not be read (see `error`).
    public var deviceDigest: EntityDigest?
    public var postgresDigest: EntityDigest
    /// Why the device's records could not be read.
    public var error: String?

    public init(device: String, entity: String, deviceDigest: EntityDigest?, postgresDigest: EntityDigest, error: String? = nil) {
        self.device = device
        self.entity = entity
        self.deviceDigest = deviceDigest
        self.postgresDigest = postgresDigest
        self.error = error
    }

    /// The entity digests of one device that differ from PostgreSQL's, in PostgreSQL's entity order.
    public static func between(device: String, digests: [String: EntityDigest], postgres: [EntityDigest]) -> [DigestMismatch] {
        postgres.compactMap { truth in
            let mine = digests[truth.entity]
            guard mine != truth else { return nil }
            return DigestMismatch(device: device, entity: truth.entity, deviceDigest: mine, postgresDigest: truth)
        }
    }
}

/// Every device's data against PostgreSQL's, as the "devices equal PostgreSQL" check needs it.
public struct DeviceComparison: Sendable, Hashable, Codable {
    public var devices: Int
    /// PostgreSQL's digests, in schema order.
    public var postgres: [EntityDigest]
    /// All mismatches, devices in the order compared.
    public var mismatches: [DigestMismatch]
    /// The first differing record of the first mismatch, on both sides (from `RecordDifference`).
    public var firstDifference: String?
    /// Devices left out of the comparison: revoked ones, which cannot converge.
    public var notCompared: Int

    public init(
        devices: Int, postgres: [EntityDigest], mismatches: [DigestMismatch], firstDifference: String? = nil, notCompared: Int = 0
    ) {
        self.devices = devices
        self.postgres = postgres
        self.mismatches = mismatches
        self.firstDifference = firstDifference
        self.notCompared = notCompared
    }
}

/// A device whose `maxRevision` went down between two observations.
public struct RevisionRegression: Sendable, Hashable, Codable, CustomStringConvertible {
    public var device: String
    public var from: Int64
    public var to: Int64

    public init(device: String, from: Int64, to: Int64) {
        self.device = device
        self.from = from
        self.to = to
    }

    public var description: String { "device \(device) \(from) → \(to)" }
}

/// A device that had not converged: change sets still pending or behind the head.
public struct DeviceLag: Sendable, Hashable, Codable, CustomStringConvertible {
    public var device: String
    public var pendingChangeSets: Int
    public var maxRevision: Int64

    public init(device: String, pendingChangeSets: Int, maxRevision: Int64) {
        self.device = device
        self.pendingChangeSets = pendingChangeSets
        self.maxRevision = maxRevision
    }

    /// The device's lag against `head`, or nil when it has converged.
    public static func of(device: String, pendingChangeSets: Int, maxRevision: Int64, head: Int64) -> DeviceLag? {
        guard pendingChangeSets > 0 || maxRevision < head else { return nil }
        return DeviceLag(device: device, pendingChangeSets: pendingChangeSets, maxRevision: maxRevision)
    }

    public var description: String { "device \(device) (\(pendingChangeSets) pending, at revision \(maxRevision))" }
}
