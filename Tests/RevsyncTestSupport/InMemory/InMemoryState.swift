import RevsyncRules
import RevsyncServer
import RevsyncWire

/// A dataset's whole stored state as plain values: what PostgreSQL holds for the server,
/// kept in memory so that the server's rules can be tested without I/O.
package struct InMemoryState: Sendable {
    package struct Row: Sendable, Hashable {
        package var revision: Int64
        package var writer: Int64
        package var otherRevision: Int64
        package var values: Attributes
    }

    package struct DeviceRow: Sendable {
        package var device: Device
        package var tokenHash: [UInt8] = []
        package var lastSeq: Int64 = 0
        package var revoked = false
        package var lastSeen = false
    }

    package struct Outcome: Sendable {
        package var revision: Int64?
        package var reason: ConflictReason?
        package var digest: [UInt8]?
        /// The head when it was rejected: the pruner drops rejections with the log.
        package var headAt: Int64
    }

    package struct Mapping: Sendable {
        package var entity: String
        package var id: Int64
        package var seq: Int64?
    }

    package struct Entry: Sendable {
        package var deviceId: Int64
        package var body: [UInt8]
        package var authorBody: [UInt8]
    }

    package var records: [String: [Int64: Row]] = [:]
    package var devices: [Int64: DeviceRow] = [:]
    package var outcomes: [Int64: [Int64: Outcome]] = [:]
    package var temporaryIds: [Int64: [Int64: Mapping]] = [:]
    package var log: [Int64: Entry] = [:]
    package var head: Int64 = 0
    package var horizon: Int64 = 0
    package var lastId: [String: Int64] = [:]

    package init() {}

    /// Moves the horizon to `head - retention` and drops the log and the rejections behind it.
    package mutating func prune(retention: Int64) {
        horizon = max(horizon, head - retention)
        log = log.filter { $0.key > horizon }
        for device in outcomes.keys {
            outcomes[device] = outcomes[device]?.filter { $0.value.revision != nil || $0.value.headAt > horizon }
        }
    }
}
