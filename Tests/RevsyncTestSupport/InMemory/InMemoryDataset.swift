import NIOCore
import RevsyncRules
import RevsyncServer
import RevsyncWire
import Synchronization

/// The server's stores kept in memory: change sets, the change log and stored records,
/// over one `InMemoryState`. Transactions run one at a time on a copy of the state that
/// replaces it on success, so a rejected or failed change set leaves nothing behind.
///
/// It loads facts and writes what the rules of RevsyncRules decided, as the PostgreSQL
/// stores do: the same `SyncService` runs over either.
package final class InMemoryDataset: ChangeSetStore, ChangeLog, RecordStore, DeviceDirectory {
    package let schema: DatasetSchema
    private let state = Mutex(InMemoryState())
    private let writers = AsyncLock()

    package init(schema: DatasetSchema) { self.schema = schema }

    /// The state now (for assertions), or changed by `body` (to set a test up).
    package func withState<T>(_ body: (inout InMemoryState) throws -> T) rethrows -> T {
        try state.withLock { try body(&$0) }
    }

    /// Registers a device without a token: its row, as `POST /devices` would create it.
    package func addDevice(id: Int64, role: String, name: String = "device") -> Device {
        let device = Device(id: id, publicId: "device-\(id)", name: name, user: "user", role: role)
        state.withLock { $0.devices[id] = InMemoryState.DeviceRow(device: device) }
        return device
    }

    // MARK: ChangeSetStore

    package func newestDatasetSchema() async throws -> DatasetSchema? { schema }

    package func transaction<T: Sendable>(_ body: @escaping @Sendable (any ApplyTransaction) async throws -> T) async throws -> T {
        try await writers.run { [self] in
            let transaction = InMemoryTransaction(state: state.withLock { $0 }, schema: schema)
            let result = try await body(transaction)
            let committed = transaction.committed
            state.withLock { $0 = committed }
            return result
        }
    }

    // MARK: RecordStore

    package func snapshot<T: Sendable>(_ body: @escaping @Sendable (any RecordReading) async throws -> T) async throws -> T {
        try await body(InMemoryTransaction(state: state.withLock { $0 }, schema: schema))
    }

    // MARK: ChangeLog

    package func state() async throws -> LogState {
        state.withLock { LogState(head: $0.head, horizon: $0.horizon) }
    }

    package func authoritativeState() async throws -> LogState { try await state() }

    package func entries(
        after revision: Int64, through head: Int64, for device: Device, limits: CatchUpLimits, form: EntryForm = .plain, own: Set<Int64> = []
    ) async throws -> CatchUpPage {
        let log = state.withLock { $0.log }
        var pager = CatchUpPager(limits: limits)
        var entries: [LogEntry] = []
        for number in log.keys.sorted() where number > revision {
            guard let entry = log[number] else { continue }
            let bytes = entry.deviceId == device.id ? entry.authorBody : entry.body
            guard pager.admit(size: bytes.count) else { break }
            entries.append(LogEntry(revision: number, bytes: ByteBuffer(bytes: bytes)))
        }
        return CatchUpPage(entries: entries, more: pager.full, source: "memory")
    }

    package func authorEntries(_ revisions: [Int64], for device: Device) async throws -> [LogEntry] {
        let log = state.withLock { $0.log }
        return revisions.sorted().compactMap { number in
            guard let entry = log[number], entry.deviceId == device.id else { return nil }
            return LogEntry(revision: number, bytes: ByteBuffer(bytes: entry.authorBody))
        }
    }

    package func didCommit(_ entries: [CommittedEntry]) async -> CommitPublication { .done }

    // MARK: DeviceDirectory

    package func insert(name: String, user: String, role: String, tokenHash: [UInt8]) async throws -> Device {
        state.withLock { state in
            let id = (state.devices.keys.max() ?? 0) + 1
            let device = Device(id: id, publicId: "device-\(id)", name: name, user: user, role: role)
            state.devices[id] = InMemoryState.DeviceRow(device: device, tokenHash: tokenHash)
            return device
        }
    }

    package func find(tokenHash: [UInt8]) async throws -> DeviceRow? {
        state.withLock { state in
            state.devices.values.first { $0.tokenHash == tokenHash }.map { DeviceRow(device: $0.device, revoked: $0.revoked) }
        }
    }

    package func info(_ device: Device) async throws -> DeviceInfo {
        guard let info = state.withLock({ Self.info($0, device.id) }) else { throw SyncRefusal.deviceGone }
        return info
    }

    package func list() async throws -> [DeviceInfo] {
        state.withLock { state in state.devices.keys.sorted().compactMap { Self.info(state, $0) } }
    }

    package func revoke(publicId: String) async throws -> Bool {
        update(publicId, activeOnly: false) { $0.revoked = true } != nil
    }

    package func replaceToken(publicId: String, tokenHash: [UInt8]) async throws -> Bool {
        update(publicId, activeOnly: true) { $0.tokenHash = tokenHash } != nil
    }

    package func setRole(publicId: String, role: String) async throws -> DeviceInfo? {
        guard let id = update(publicId, activeOnly: true, { row in
            row.device = Device(id: row.device.id, publicId: row.device.publicId, name: row.device.name, user: row.device.user, role: role)
        }) else { return nil }
        return state.withLock { Self.info($0, id) }
    }

    package func markSeen(_ ids: [Int64]) async throws {
        state.withLock { state in
            for id in ids { state.devices[id]?.lastSeen = true }
        }
    }

    /// Changes the row of the device named `publicId`; its id, or nil when there is none (or none active).
    private func update(_ publicId: String, activeOnly: Bool, _ change: (inout InMemoryState.DeviceRow) -> Void) -> Int64? {
        state.withLock { state in
            guard let id = state.devices.first(where: { $0.value.device.publicId == publicId && !(activeOnly && $0.value.revoked) })?.key
            else { return nil }
            change(&state.devices[id]!)
            return id
        }
    }

    private static func info(_ state: InMemoryState, _ id: Int64) -> DeviceInfo? {
        guard let row = state.devices[id] else { return nil }
        return DeviceInfo(
            deviceId: row.device.publicId, name: row.device.name, user: row.device.user, role: row.device.role,
            created: "2024-01-01T00:00:00Z", lastSeen: row.lastSeen ? "2024-01-01T00:00:00Z" : nil, lastSeq: row.lastSeq,
            lowestTemporaryId: min(0, state.temporaryIds[id]?.keys.min() ?? 0), revoked: row.revoked ? "2024-01-01T00:00:00Z" : nil)
    }
}
