import AsyncHTTPClient

/// `GET /ready` of one server.
enum ReadinessProbe {
    /// True when the URL answers 200 within a second; any error or other status is "not yet".
    static func isReady(_ url: String, httpClient: HTTPClient = .shared) async -> Bool {
        do {
            let response = try await httpClient.execute(HTTPClientRequest(url: url), timeout: .seconds(1))
            _ = try await response.body.collect(upTo: 64 * 1024)
            return response.status == .ok
        } catch {
            return false
        }
    }
}
