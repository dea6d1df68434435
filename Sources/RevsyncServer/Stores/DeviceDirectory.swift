import RevsyncWire

/// A device row found by its token's hash.
package struct DeviceRow: Sendable {
    package let device: Device
    package let revoked: Bool

    package init(device: Device, revoked: Bool) {
        self.device = device
        self.revoked = revoked
    }
}

/// Where devices and the hashes of their tokens are kept. Tokens themselves are never stored.
package protocol DeviceDirectory: Sendable {
    func insert(name: String, user: String, role: String, tokenHash: [UInt8]) async throws -> Device
    func find(tokenHash: [UInt8]) async throws -> DeviceRow?
    /// The rows of the devices holding these token hashes, by hash; unknown ones are left out.
    func find(tokenHashes: [[UInt8]]) async throws -> [[UInt8]: DeviceRow]
    /// `SyncRefusal.deviceGone` when it no longer exists.
    func info(_ device: Device) async throws -> DeviceInfo
    /// Every device, revoked ones included, oldest first.
    func list() async throws -> [DeviceInfo]
    /// Marks the device revoked (once); false when there is no such device.
    func revoke(publicId: String) async throws -> Bool
    /// Replaces an active device's token hash; false when there is no such active device.
    func replaceToken(publicId: String, tokenHash: [UInt8]) async throws -> Bool
    /// Changes an active device's role; nil when there is no such active device.
    func setRole(publicId: String, role: String) async throws -> DeviceInfo?
    /// Records that the devices were seen now.
    func markSeen(_ ids: [Int64]) async throws
}

extension DeviceDirectory {
    /// One look-up after another, for a directory that has no better way.
    package func find(tokenHashes: [[UInt8]]) async throws -> [[UInt8]: DeviceRow] {
        var rows: [[UInt8]: DeviceRow] = [:]
        for hash in tokenHashes {
            if let row = try await find(tokenHash: hash) { rows[hash] = row }
        }
        return rows
    }
}
