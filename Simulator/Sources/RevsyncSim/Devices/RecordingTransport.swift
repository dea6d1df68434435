import RevsyncDevice
import RevsyncWire

/// A device's transport that tells its `AcknowledgementLedger` what each `/sync`
/// answer acknowledged, then hands the answer on unchanged.
struct RecordingTransport: SyncTransport {
    let base: any SyncTransport
    let ledger: AcknowledgementLedger

    func sync(_ request: SyncRequest, token: String) async throws -> SyncResponse {
        let response = try await base.sync(request, token: token)
        ledger.record(request, response)
        return response
    }

    func snapshot(token: String) async throws -> SyncResponse {
        try await base.snapshot(token: token)
    }

    func schema(token: String) async throws -> SchemaDocument {
        try await base.schema(token: token)
    }

    func register(_ registration: DeviceRegistration, adminToken: String) async throws -> RegisteredDevice {
        try await base.register(registration, adminToken: adminToken)
    }

    func device(token: String) async throws -> DeviceInfo {
        try await base.device(token: token)
    }
}
