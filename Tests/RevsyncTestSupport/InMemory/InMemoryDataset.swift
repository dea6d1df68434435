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
package final class InMemoryDataset: ChangeSetStore, ChangeLog, RecordStore {
    package let schema: DatasetSchema
    private let state = Mutex(InMemoryState())
    private let writers = AsyncLock()

    package init(schema: DatasetSchema) { self.schema = schema }

    /// The state now (for assertions), or changed by `body` (to set a test up).
    package func withState<T>(_ body: (inout InMemoryState) throws -> T) rethrows -> T {
        try state.withLock { try body(&$0) }
    }

    /// Registers a device: its row, as `POST /devices` would create it.
    package func addDevice(id: Int64, role: String, name: String = "device") -> Device {
        state.withLock { $0.devices[id] = InMemoryState.DeviceRow() }
        return Device(id: id, publicId: "device-\(id)", name: name, user: "user", role: role)
    }

    // MARK: ChangeSetStore

    package func read<T: Sendable>(_ body: @escaping @Sendable (any LedgerReading) async throws -> T) async throws -> T {
        try await body(InMemoryTransaction(state: state.withLock { $0 }, schema: schema))
    }

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

    package func entries(after revision: Int64, through head: Int64, for device: Device, limits: CatchUpLimits) async throws -> CatchUpPage {
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

    package func didCommit(_ entry: CommittedEntry) async {}
}
