import Foundation
import Logging
import RevsyncRules
import RevsyncServer
import RevsyncWire

/// The server's `/sync`, `/snapshot`, `/schema` and `/devices/me` work over in-memory stores,
/// for tests of a device engine that need a server but no I/O. Every rule is the real
/// server's: `SyncService` decides, `InMemoryDataset` keeps the state.
package actor InMemoryServer {
    package nonisolated let schema: DatasetSchema
    package nonisolated let dataset: InMemoryDataset
    package private(set) var limits: ServerSettings.Limits
    private var service: SyncService
    private var tokens: [String: Device] = [:]
    private var nextDevice: Int64 = 1

    package init(schema: DatasetSchema, limits: ServerSettings.Limits = ServerSettings.Limits()) {
        self.schema = schema
        self.limits = limits
        dataset = InMemoryDataset(schema: schema)
        service = Self.service(dataset, schema: schema, limits: limits)
    }

    private static func service(_ dataset: InMemoryDataset, schema: DatasetSchema, limits: ServerSettings.Limits) -> SyncService {
        SyncService(changeSets: dataset, changeLog: dataset, records: dataset, schema: schema, limits: limits, metrics: ServerMetrics())
    }

    /// Changes the limits for the requests that follow.
    package func configure(_ change: @Sendable (inout ServerSettings.Limits) -> Void) {
        change(&limits)
        service = Self.service(dataset, schema: schema, limits: limits)
    }

    /// Registers a device with `role` under the token `token-<name>`.
    package func register(name: String, role: String) -> (device: Device, token: String) {
        let device = dataset.addDevice(id: nextDevice, role: role, name: name)
        nextDevice += 1
        let token = "token-\(name)"
        tokens[token] = device
        return (device, token)
    }

    package func authenticate(_ token: String) throws(SyncRefusal) -> Device {
        guard let device = tokens[token] else {
            throw SyncRefusal(.unauthorized, "the token is not known: register the device with POST /devices")
        }
        if dataset.withState({ $0.devices[device.id]?.revoked ?? true }) { throw SyncRefusal.deviceRevoked }
        return device
    }

    package func sync(_ request: SyncRequest, token: String) async throws -> SyncResponse {
        let device = try authenticate(token)
        let body = try await service.sync(request, device: device, logger: Logger(label: "revsync.in-memory"))
        return try JSONDecoder().decode(SyncResponse.self, from: Data(body.readableBytesView))
    }

    /// `GET /devices/me`.
    package func info(token: String) throws -> DeviceInfo {
        let device = try authenticate(token)
        let (lastSeq, lowest) = dataset.withState { state in
            (state.devices[device.id]?.lastSeq ?? 0, min(0, state.temporaryIds[device.id]?.keys.min() ?? 0))
        }
        return DeviceInfo(
            deviceId: device.publicId, name: device.name, user: device.user, role: device.role, created: "2024-01-01T00:00:00Z",
            lastSeen: nil, lastSeq: lastSeq, lowestTemporaryId: lowest)
    }

    /// `GET /schema`: the schema as the device's role sees it.
    package func schemaDocument(token: String) throws -> SchemaDocument {
        schema.document(for: try authenticate(token).role)
    }

    /// `GET /snapshot`: every record at the head, as one change set of creates.
    package func snapshot(token: String) throws -> SyncResponse {
        _ = try authenticate(token)
        let (records, head) = dataset.withState { ($0.records, $0.head) }
        var changeSet = ChangeSet()
        changeSet.conflict = false
        changeSet.revision = head
        for entity in schema.entities {
            var changes = EntityChanges()
            for (id, row) in (records[entity.name] ?? [:]).sorted(by: { $0.key < $1.key }) {
                var values = row.values
                values[ReservedAttribute.revision] = .integer(row.revision)
                changes.create.append(id)
                changes.attributes[id] = values
            }
            changeSet[entity.name] = changes
        }
        return SyncResponse(maxRevision: head, changeSets: [changeSet])
    }
}
