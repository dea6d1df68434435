import RevsyncDevice

/// What the verdict asks of one device of the run.
public protocol VerdictDevice: Sendable {
    /// The device's server id, revision and outbox, read now.
    func verdictStatus() async throws -> VerdictDeviceStatus
    /// Every record of `entity` the device holds, with every attribute.
    func records(of entity: String) async throws -> [DeviceRecord]
    /// The `seq`s of the rejections the device received as conflicts.
    func deliveredRejectionSeqs() async throws -> Set<Int64>
    /// The `seq`s still in the device's outbox.
    func pendingSeqs() async throws -> Set<Int64>
}

public struct VerdictDeviceStatus: Sendable, Hashable {
    /// The server's public id of the device.
    public var deviceId: String
    public var maxRevision: Int64
    public var pendingChangeSets: Int

    public init(deviceId: String, maxRevision: Int64, pendingChangeSets: Int) {
        self.deviceId = deviceId
        self.maxRevision = maxRevision
        self.pendingChangeSets = pendingChangeSets
    }
}

extension SyncEngine: VerdictDevice {
    public func verdictStatus() async throws -> VerdictDeviceStatus {
        let status = try await status()
        guard let deviceId = status.deviceId else { throw VerdictError("a device of the run has no server id: it never registered") }
        return VerdictDeviceStatus(deviceId: deviceId, maxRevision: status.maxRevision, pendingChangeSets: status.pendingChangeSets)
    }

    public func records(of entity: String) async throws -> [DeviceRecord] {
        try await records(entity)
    }

    /// From the stored conflict notifications: the run must not dismiss them.
    public func deliveredRejectionSeqs() async throws -> Set<Int64> {
        Set(try await storedConflicts().compactMap(\.seq))
    }

    public func pendingSeqs() async throws -> Set<Int64> {
        Set(try await pendingChangeSets().compactMap(\.seq))
    }
}
