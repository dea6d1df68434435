extension Server {
    /// The device holding `token`, for callers that run the server's work without HTTP (the benchmark).
    public func device(_ token: String) async throws -> Device {
        try await sync.authenticator.device(token: token)
    }
}
