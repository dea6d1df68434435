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
    package nonisolated let devices: DeviceStore
    private var service: SyncService

    package init(schema: DatasetSchema, limits: ServerSettings.Limits = ServerSettings.Limits()) {
        self.schema = schema
        self.limits = limits
        dataset = InMemoryDataset(schema: schema)
        devices = DeviceStore(directory: dataset)
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

    /// Registers a device with `role`, as `POST /devices` does.
    package func register(name: String, role: String) async throws -> (device: Device, token: String) {
        try await devices.register(name: name, user: name, role: role)
    }

    package func authenticate(_ token: String) async throws -> Device {
        guard let device = try await devices.authenticate(token: token) else {
            throw SyncRefusal(.unauthorized, "the token is not known: register the device with POST /devices")
        }
        return device
    }

    package func sync(_ request: SyncRequest, token: String) async throws -> SyncResponse {
        let device = try await authenticate(token)
        let body = try await service.sync(request, device: device, logger: Logger(label: "revsync.in-memory"))
        return try JSONDecoder().decode(SyncResponse.self, from: Data(body.readableBytesView))
    }

    /// `GET /devices/me`.
    package func info(token: String) async throws -> DeviceInfo {
        try await devices.info(try await authenticate(token))
    }

    /// `GET /schema`: the schema as the device's role sees it.
    package func schemaDocument(token: String) async throws -> SchemaDocument {
        schema.document(for: try await authenticate(token).role)
    }

    /// `GET /snapshot`: every record at the head, as one change set of creates.
    package func snapshot(token: String) async throws -> SyncResponse {
        _ = try await authenticate(token)
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
