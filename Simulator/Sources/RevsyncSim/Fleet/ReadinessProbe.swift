import AsyncHTTPClient
import NIOCore

/// `GET /ready` of one server.
enum ReadinessProbe {
    /// True when the URL answers 200 within a second; any error or other status is "not yet".
    static func isReady(_ url: String, httpClient: HTTPClient = .shared) async -> Bool {
        await answer(url, timeout: .seconds(1), httpClient: httpClient).status == 200
    }
}

extension ReadinessProbe {
    /// `GET /ready` of one server, waited for up to `timeout`: its status (nil when no answer
    /// came: refused, reset or timed out) and how long it took.
    static func answer(_ url: String, timeout: Duration, httpClient: HTTPClient = .shared) async -> ReadinessAnswer {
        let started = ContinuousClock.now
        do {
            let response = try await httpClient.execute(HTTPClientRequest(url: url), timeout: .nanoseconds(Int64(timeout.inSeconds * 1e9)))
            let body = try await response.body.collect(upTo: 64 * 1024)
            return ReadinessAnswer(
                status: Int(response.status.code), seconds: (ContinuousClock.now - started).inSeconds, error: nil,
                body: String(buffer: body))
        } catch {
            return ReadinessAnswer(status: nil, seconds: (ContinuousClock.now - started).inSeconds, error: "\(error)")
        }
    }
}

/// One `GET /ready` answer, or why none came.
public struct ReadinessAnswer: Sendable, Equatable {
    public var status: Int?
    public var seconds: Double
    public var error: String?
    /// The answer's body (its error message when not 200).
    public var body: String?

    public init(status: Int?, seconds: Double, error: String?, body: String? = nil) {
        self.status = status
        self.seconds = seconds
        self.error = error
        self.body = body
    }
}
