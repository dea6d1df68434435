import RevsyncDevice
import RevsyncWire

/// A device's transport that tells its `AcknowledgementLedger` what each `/sync`
/// answer acknowledged, and `onAcknowledged` the revisions of the change sets the
/// request carried that it acknowledged, then hands the answer on unchanged.
struct RecordingTransport: SyncTransport {
    let base: any SyncTransport
    let ledger: AcknowledgementLedger
    /// Called as the answer arrives: the moment the device has its acknowledgements.
    var onAcknowledged: (@Sendable ([Int64]) -> Void)?
    /// Every exchange, a line each, when the run asks for traces (`ExchangeTrace`).
    var trace: ExchangeTrace?

    func sync(_ request: SyncRequest, token: String) async throws -> SyncResponse {
        let response: SyncResponse
        do {
            response = try await base.sync(request, token: token)
            trace?.sync(request, .success(response))
        } catch {
            trace?.sync(request, .failure(error))
            throw error
        }
        ledger.record(request, response)
        if let onAcknowledged, !request.changeSets.isEmpty {
            let sent = Set(request.changeSets.compactMap(\.seq))
            let revisions = response.changeSets.compactMap { changeSet -> Int64? in
                guard changeSet.conflict != true, let seq = changeSet.seq, sent.contains(seq) else { return nil }
                return changeSet.revision
            }
            if !revisions.isEmpty { onAcknowledged(revisions) }
        }
        return response
    }

    func snapshot(token: String) async throws -> SyncResponse {
        do {
            let snapshot = try await base.snapshot(token: token)
            trace?.snapshot(.success(snapshot))
            return snapshot
        } catch {
            trace?.snapshot(.failure(error))
            throw error
        }
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

    func snapshotFile(token: String, to path: String, minimumRevision: Int64) async throws -> SnapshotFileDownload? {
        do {
            let download = try await base.snapshotFile(token: token, to: path, minimumRevision: minimumRevision)
            trace?.snapshotFile(minimum: minimumRevision, .success(download))
            return download
        } catch {
            trace?.snapshotFile(minimum: minimumRevision, .failure(error))
            throw error
        }
    }
}
