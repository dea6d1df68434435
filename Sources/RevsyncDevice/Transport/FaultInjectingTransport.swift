import RevsyncWire

/// Wraps a transport to make `/sync` calls fail on purpose, for tests and the
/// simulator: a response lost after the server committed, an error before
/// anything is sent, or a hook that runs while a request is in flight.
///
/// Faults are consumed one per `/sync` call, in the order they were queued
/// (long-polls, `/sync` with `wait`, are `/sync` calls too); calls with no fault
/// queued pass through. Cancelling a call cancels the wrapped one.
public actor FaultInjectingTransport: SyncTransport {
    public enum Fault: Sendable {
        /// The request reaches the server (which commits it); its response is
        /// dropped and the call fails with `.connection`, as when the network
        /// goes away before the answer arrives.
        case loseResponse
        /// The call fails with `error` without reaching the server.
        case failBeforeSending(SyncTransportError)
    }

    private let base: any SyncTransport
    private var faults: [Fault] = []
    private var inFlightHook: (@Sendable (SyncRequest) async -> Void)?

    /// Every `/sync` request made, in order (failed ones included).
    public private(set) var requests: [SyncRequest] = []
    /// Responses the server gave that were dropped by `.loseResponse`.
    public private(set) var lostResponses: [SyncResponse] = []

    public init(wrapping base: any SyncTransport) {
        self.base = base
    }

    /// Queues a fault for a coming `/sync` call.
    public func inject(_ fault: Fault) {
        faults.append(fault)
    }

    /// Runs `hook` after the server answered a `/sync` call and before the answer
    /// is returned: the window in which local edits race a request in flight.
    public func setInFlightHook(_ hook: (@Sendable (SyncRequest) async -> Void)?) {
        inFlightHook = hook
    }

    public func sync(_ request: SyncRequest, token: String) async throws -> SyncResponse {
        requests.append(request)
        let fault = faults.isEmpty ? nil : faults.removeFirst()
        if case .failBeforeSending(let error)? = fault { throw error }
        let response = try await base.sync(request, token: token)
        if let inFlightHook { await inFlightHook(request) }
        if case .loseResponse? = fault {
            lostResponses.append(response)
            throw SyncTransportError.connection("response lost (injected)")
        }
        return response
    }

    public func snapshot(token: String) async throws -> SyncResponse {
        try await base.snapshot(token: token)
    }

    public func schema(token: String) async throws -> SchemaDocument {
        try await base.schema(token: token)
    }

    public func register(_ registration: DeviceRegistration, adminToken: String) async throws -> RegisteredDevice {
        try await base.register(registration, adminToken: adminToken)
    }

    public func device(token: String) async throws -> DeviceInfo {
        try await base.device(token: token)
    }

    public func snapshotFile(token: String, to path: String, minimumRevision: Int64) async throws -> SnapshotFileDownload? {
        try await base.snapshotFile(token: token, to: path, minimumRevision: minimumRevision)
    }
}
